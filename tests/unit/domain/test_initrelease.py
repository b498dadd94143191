"""A pod's hold on its cards drops to its app containers' use once its init containers finish."""

from typing import Any

import pytest

from vgpu.domain.device import Usage
from vgpu.domain.errors import DomainError
from vgpu.domain.grant import DeviceGrant, pod_footprint
from vgpu.domain.initrelease import (
    InitProgress,
    hold_after_init,
    init_progress,
    pod_hold,
    released_by_init,
)
from vgpu.domain.ledger import Ledger
from vgpu.domain.pod import Container, Pod, pod_from_manifest
from vgpu.domain.vendor import NVIDIA


def _g(uuid: str, memory: int, cores: int = 0) -> DeviceGrant:
    return DeviceGrant(uuid, "NVIDIA", memory, cores)


# init container on GPU-a (8000 MiB) and GPU-b, then two app containers on GPU-a
GRANTS = (
    (_g("GPU-a", 8000, 50), _g("GPU-b", 4000)),
    (_g("GPU-a", 2000, 10),),
    (_g("GPU-a", 1000),),
)


def test_before_the_init_containers_finish_the_peak_is_held() -> None:
    hold = pod_hold(GRANTS, InitProgress(count=1))
    assert hold == pod_footprint(GRANTS, 1)
    assert hold["GPU-a"] == Usage(slices=2, memory=8000, cores=50)


def test_after_they_finish_only_the_app_containers_are_held() -> None:
    hold = pod_hold(GRANTS, InitProgress(count=1, finished=True))
    assert hold == {"GPU-a": Usage(slices=2, memory=3000, cores=10)}


def test_what_finishing_frees_per_card() -> None:
    assert released_by_init(GRANTS, InitProgress(count=1, finished=True)) == {
        "GPU-a": Usage(slices=0, memory=5000, cores=40),
        "GPU-b": Usage(slices=1, memory=4000, cores=0),
    }


def test_a_sidecar_keeps_its_hold_beside_the_app_containers() -> None:
    grants = ((_g("GPU-a", 1000),), (_g("GPU-a", 6000),), (_g("GPU-a", 2000),))
    sidecar_first = InitProgress(count=2, sidecars=frozenset({0}))
    # while the second init container runs, the sidecar runs too: 1000 + 6000
    assert pod_hold(grants, sidecar_first)["GPU-a"].memory == 7000
    done = InitProgress(count=2, finished=True, sidecars=frozenset({0}))
    assert pod_hold(grants, done)["GPU-a"] == Usage(slices=2, memory=3000)


def _manifest(init: list[dict[str, Any]], statuses: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "spec": {"initContainers": init, "containers": [{"name": "app"}]},
        "status": {"initContainerStatuses": statuses},
    }


def _done(name: str, code: int = 0) -> dict[str, Any]:
    return {"name": name, "state": {"terminated": {"exitCode": code}}}


@pytest.mark.parametrize(
    ("statuses", "finished"),
    [
        ([], False),
        ([_done("fetch")], False),
        ([_done("fetch"), {"name": "warm", "state": {"running": {}}}], False),
        ([_done("fetch"), _done("warm", 1)], False),  # failed: it will run again
        ([_done("fetch"), _done("warm")], True),
    ],
)
def test_init_progress_is_read_from_the_container_statuses(
    statuses: list[dict[str, Any]], finished: bool
) -> None:
    progress = init_progress(_manifest([{"name": "fetch"}, {"name": "warm"}], statuses))
    assert (progress.count, progress.finished) == (2, finished)


def test_a_running_sidecar_does_not_hold_back_the_release() -> None:
    manifest = _manifest(
        [{"name": "proxy", "restartPolicy": "Always"}, {"name": "fetch"}],
        [{"name": "proxy", "state": {"running": {}}}, _done("fetch")],
    )
    assert init_progress(manifest) == InitProgress(2, True, frozenset({0}))


def test_a_pod_without_init_containers_has_finished_them() -> None:
    assert init_progress({"spec": {"containers": []}}) == InitProgress(0, True)


def test_a_malformed_status_is_refused_with_its_place() -> None:
    with pytest.raises(DomainError, match=r"status\.initContainerStatuses must be a list"):
        init_progress({"spec": {}, "status": {"initContainerStatuses": {"x": 1}}})


def test_the_hold_after_init_is_none_until_the_init_containers_finish() -> None:
    assert hold_after_init(GRANTS, InitProgress(1, False)) is None
    assert hold_after_init(GRANTS[1:], InitProgress(0, True)) is None  # no init containers
    assert hold_after_init(GRANTS, InitProgress(1, True)) == {"GPU-a": Usage(2, 3000, 10)}


def test_a_pod_read_from_its_manifest_knows_its_init_progress() -> None:
    manifest = _manifest([{"name": "fetch"}], [_done("fetch")])
    manifest["metadata"] = {"name": "p"}
    assert pod_from_manifest(manifest).init_progress == InitProgress(1, True)


def test_a_pod_built_without_statuses_has_not_finished_its_init_containers() -> None:
    pod = Pod("ns", "p", containers=(Container("init", is_init=True), Container("main")))
    assert pod.init_progress == InitProgress(1, False)


def test_the_ledger_holds_less_for_a_pod_read_after_its_init_containers() -> None:
    manifest = _manifest([{"name": "fetch"}], [_done("fetch")])
    manifest["metadata"] = {
        "name": "p",
        "annotations": {
            "hami.io/vgpu-node": "n1",
            "hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,8000,50:;GPU-a,NVIDIA,2000,10:;",
        },
    }
    ledger = Ledger()
    ledger.record_pod(pod_from_manifest(manifest), NVIDIA)
    assert ledger.usage("n1", "GPU-a") == Usage(1, 2000, 10)
