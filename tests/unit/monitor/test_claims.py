"""The monitor on a DRA node: the regions in the driver's claim share directories, exported as
the same per-container figures as a device-plugin container's, labelled with the pods and
containers that use the claim; the directories themselves are left to the driver."""

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.unit.dra_driver.node import NODE, claim_json, make_node, ref, share
from tests.unit.monitor.regionbytes import (
    GIB,
    MIB,
    UUID_A,
    UUID_B,
    two_gpu_spec,
    v1_bytes,
    write_region,
)
from tests.unit.monitor.scrape import Series, key, parse, series
from vgpu.adapters.fake.accounting import FakeAccounting
from vgpu.adapters.hamicore import HamiCoreRegions
from vgpu.adapters.hamicore.layout import decode
from vgpu.app.monitor.daemon import MonitorDaemon
from vgpu.app.monitor.metrics import MonitorMetrics, MonitorSources
from vgpu.domain.pod import Pod, pod_from_manifest
from vgpu.ports.accounting import AccountingPort, ClaimShare

REGION = decode(v1_bytes(two_gpu_spec()), len(v1_bytes(two_gpu_spec())))
SHARE = ClaimShare("uid-train", "ml", "job-1-gpu-x7k2p", "gpu", "share-1")


def pod(
    name: str,
    containers: list[dict[str, Any]],
    *,
    init: list[dict[str, Any]] | None = None,
    claim: str = "job-1-gpu-x7k2p",
    phase: str = "Running",
) -> Pod:
    """A pod on the node whose entry `gpu` is a claim made from a template (named in its
    status, as kube-controller-manager writes it)."""
    spec: dict[str, Any] = {
        "nodeName": NODE,
        "containers": containers,
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "vgpu-0123"}],
    }
    if init:
        spec["initContainers"] = init
    return pod_from_manifest(
        {
            "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
            "spec": spec,
            "status": {
                "phase": phase,
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}],
            },
        }
    )


def using(name: str, *claims: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "resources": {"claims": list(claims) or [{"name": "gpu"}]}}


def scrape(accounting: AccountingPort, pods: list[Pod]) -> Series:
    sources = MonitorSources(NODE, _NoCards(), accounting, lambda: pods, clock=lambda: 0.0)
    return parse(MonitorMetrics(sources).render().decode())


class _NoCards:
    def read_usage(self) -> list[Any]:
        return []


def labels(container: str, device: int, uuid: str, name: str = "job-1") -> Any:
    return key(
        namespace="ml", pod=name, container=container, vdevice_index=str(device), device_uuid=uuid
    )


def test_a_share_region_is_labelled_with_the_container_that_uses_the_claim() -> None:
    fake = FakeAccounting()
    fake.add_share(SHARE, REGION)

    found = scrape(fake, [pod("job-1", [using("main"), {"name": "log"}])])

    a, b = labels("main", 0, UUID_A), labels("main", 1, UUID_B)
    assert series(found, "hami_vgpu_memory_limit_bytes") == {a: 3000 * MIB, b: 5 * GIB}
    assert series(found, "hami_container_device_memory_bytes") == {
        a: 1522 * MIB,
        b: 310 * MIB + 2 * GIB,
    }
    assert series(found, "hami_container_device_utilization_ratio") == {a: 40, b: 60}


def test_every_container_and_pod_using_a_shared_claim_is_shown_the_shares_figures() -> None:
    fake = FakeAccounting()
    fake.add_share(SHARE, REGION)
    pods = [
        pod("job-1", [using("main"), using("helper")]),
        pod("job-2", [using("main")]),
    ]

    found = series(scrape(fake, pods), "hami_vgpu_memory_limit_bytes")

    owners = {(dict(k)["pod"], dict(k)["container"]) for k in found}
    assert owners == {("job-1", "main"), ("job-1", "helper"), ("job-2", "main")}


def test_a_container_using_another_request_of_the_claim_is_not_shown_this_share() -> None:
    fake = FakeAccounting()
    fake.add_share(
        ClaimShare("uid-train", "ml", "job-1-gpu-x7k2p", "gpu/card-81920mi", "s1"), REGION
    )
    pods = [
        pod(
            "job-1",
            [
                using("a", {"name": "gpu", "request": "gpu"}),
                using("b", {"name": "gpu", "request": "nic"}),
            ],
        )
    ]

    found = series(scrape(fake, pods), "hami_vgpu_memory_limit_bytes")

    assert {dict(k)["container"] for k in found} == {"a"}


def test_sidecars_count_and_plain_init_containers_do_not() -> None:
    fake = FakeAccounting()
    fake.add_share(SHARE, REGION)
    sidecar = using("proxy")
    sidecar["restartPolicy"] = "Always"

    found = series(
        scrape(fake, [pod("job-1", [using("main")], init=[using("warmup"), sidecar])]),
        "hami_vgpu_memory_limit_bytes",
    )

    assert {dict(k)["container"] for k in found} == {"main", "proxy"}


@pytest.mark.parametrize(
    "pods",
    [
        [],  # no pod on the node uses the claim (yet)
        [pod("job-1", [using("main")], claim="another-claim")],
        [pod("job-1", [using("main")], phase="Succeeded")],
        [pod("job-1", [{"name": "main"}])],  # lists no claim
    ],
)
def test_a_share_no_running_container_uses_has_no_series(pods: list[Pod]) -> None:
    fake = FakeAccounting()
    fake.add_share(SHARE, REGION)

    assert series(scrape(fake, pods), "hami_vgpu_memory_limit_bytes") == {}


def test_the_monitor_never_removes_a_claim_share_directory() -> None:
    fake = FakeAccounting()
    entry = fake.add_share(SHARE, REGION)
    daemon = MonitorDaemon(
        fake, lambda: [], interval=5, cleanup_grace=0, priority_feedback=True, clock=lambda: 1e9
    )

    daemon.tick()

    assert fake.removed == [] and fake.list_dirs() == [entry]
    assert "utilization_switch" in [w[1] for w in fake.writes]  # priority feedback still runs


# the driver's directories on disk --------------------------------------------------------------
def test_the_directories_the_driver_prepares_are_read_and_labelled(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node")
    manifest = claim_json("job-1-gpu-x7k2p", share(memory_mib=4096, cores=30), uid="uid-train")
    node.api.put_claim(manifest)
    assert node.preparer.prepare([ref(manifest)])["uid-train"].error == ""
    claims = tmp_path / "node" / "hook" / "vgpu" / "claims"
    (share_dir,) = [p for p in (claims / "uid-train").iterdir() if p.is_dir()]
    write_region(share_dir, v1_bytes(two_gpu_spec()), name="vgpu.cache")
    regions = HamiCoreRegions(tmp_path / "containers", claims_root=claims)

    (entry,) = regions.list_dirs()
    found = scrape(regions, [pod("job-1", [using("main")])])

    assert entry.claim == ClaimShare("uid-train", "ml", "job-1-gpu-x7k2p", "gpu", share_dir.name)
    assert series(found, "hami_vgpu_memory_limit_bytes")[labels("main", 0, UUID_A)] == 3000 * MIB
    with pytest.raises(ValueError, match="the DRA driver removes it"):
        regions.remove(entry)
    assert share_dir.is_dir()


def test_claim_directories_without_a_readable_claim_file_are_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    claims = tmp_path / "claims"
    (claims / "uid-new" / "share-1").mkdir(parents=True)  # being prepared: no claim.json yet
    (claims / "uid-bad" / "share-1").mkdir(parents=True)
    (claims / "uid-bad" / "claim.json").write_text("{not json")
    (claims / "uid-other" / "share-1").mkdir(parents=True)
    (claims / "uid-other" / "claim.json").write_text(
        '{"claim": {"uid": "uid-else", "namespace": "ml", "name": "x"}, "shares": []}'
    )
    regions = HamiCoreRegions(tmp_path / "containers", claims_root=claims)

    with caplog.at_level(logging.WARNING):
        assert regions.list_dirs() == []
        assert regions.list_dirs() == []

    warned = [r.getMessage() for r in caplog.records if "claim directory" in r.getMessage()]
    assert len(warned) == 2  # each problem once
    assert any("uid-bad" in w and "does not read" in w for w in warned)
    assert any("uid-other" in w and "is not the driver's" in w for w in warned)


def test_a_node_without_claim_directories_lists_its_containers_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "containers" / "uid-1_main").mkdir(parents=True)
    regions = HamiCoreRegions(tmp_path / "containers", claims_root=tmp_path / "missing")

    with caplog.at_level(logging.WARNING):
        assert [e.pod_uid for e in regions.list_dirs()] == ["uid-1"]

    assert caplog.records == []
