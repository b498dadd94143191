"""Once a pod's init containers have finished, it holds only what its app containers use."""

from typing import Any

from tests.unit.scheduler.builders import A40_UUIDS, a40_node, manifest, signed, world
from vgpu.domain import Usage
from vgpu.ports.cluster import Quota

CARD = A40_UUIDS[0]


def with_init(
    init_memory: int, app_memory: int, init_state: dict[str, Any] | None, *, sidecar: int = 0
) -> dict[str, Any]:
    """A running pod on node1: init container `setup` (and sidecar `proxy` when `sidecar`
    MiB are given) before the app container `main`, every one granted a slice of CARD."""
    inits: list[dict[str, Any]] = [{"name": "setup", "image": "cuda:12"}]
    grants = [f"{CARD},NVIDIA,{init_memory},0:"]
    statuses: list[dict[str, Any]] = []
    if init_state is not None:
        statuses.append({"name": "setup", "state": init_state})
    if sidecar:
        inits.append({"name": "proxy", "image": "cuda:12", "restartPolicy": "Always"})
        grants.append(f"{CARD},NVIDIA,{sidecar},0:")
        statuses.append({"name": "proxy", "state": {"running": {}}})
    grants.append(f"{CARD},NVIDIA,{app_memory},0:")
    body = manifest(
        "trainer",
        node="node1",
        phase="Pending" if init_state is None else "Running",
        annotations={
            "hami.io/vgpu-node": "node1",
            "hami.io/vgpu-devices-allocated": ";".join(grants) + ";",
        },
        gpu=1,
        gpumem=app_memory,
    )
    body["spec"]["initContainers"] = inits
    body["status"]["initContainerStatuses"] = statuses
    return signed(body)


DONE = {"terminated": {"exitCode": 0, "reason": "Completed"}}


def test_a_big_init_container_frees_its_memory_when_it_finishes() -> None:
    w = world(a40_node("node1"))
    w.add_pod(with_init(40000, 5000, {"running": {}}))
    assert w.usage("node1", CARD) == Usage(1, 40000, 0)
    w.add_pod(with_init(40000, 5000, DONE))  # the pod's MODIFIED event
    assert w.usage("node1", CARD) == Usage(1, 5000, 0)


def test_the_freed_memory_can_be_granted_to_another_pod() -> None:
    w = world(a40_node("node1"))
    others = [c for c in A40_UUIDS if c != CARD]
    for i, card in enumerate(others):  # fill every other card
        w.add_pod(
            signed(
                manifest(
                    f"filler-{i}",
                    node="node1",
                    phase="Running",
                    annotations={
                        "hami.io/vgpu-node": "node1",
                        "hami.io/vgpu-devices-allocated": f"{card},NVIDIA,46068,0:;",
                    },
                    gpu=1,
                    gpumem=46068,
                )
            )
        )
    w.add_pod(with_init(40000, 5000, {"running": {}}))
    assert w.filter(manifest("next", gpu=1, gpumem=30000), "node1").node_names is None
    w.add_pod(with_init(40000, 5000, DONE))
    assert w.filter(manifest("next", gpu=1, gpumem=30000), "node1").node_names == ["node1"]


def test_a_restart_rebuilds_the_released_hold() -> None:
    w = world(a40_node("node1"))
    w.add_pod(with_init(40000, 5000, DONE))
    restarted = world(cluster=w.cluster)
    assert restarted.usage("node1", CARD) == w.usage("node1", CARD) == Usage(1, 5000, 0)


def test_a_failed_or_unknown_init_container_keeps_the_whole_hold() -> None:
    w = world(a40_node("node1"))
    w.add_pod(with_init(40000, 5000, {"terminated": {"exitCode": 1}}))
    assert w.usage("node1", CARD) == Usage(1, 40000, 0)
    w.add_pod(with_init(40000, 5000, None))  # no status reported yet
    assert w.usage("node1", CARD) == Usage(1, 40000, 0)


def test_the_namespace_quota_is_charged_the_smaller_hold_too() -> None:
    w = world(a40_node("node1"))
    w.cluster.put_quota(Quota("default", "q", {"limits.nvidia.com/gpumem": "42000"}))
    w.add_pod(with_init(40000, 5000, {"running": {}}))
    assert w.state.quota.used("default").memory == 40000
    assert w.filter(manifest("next", gpu=1, gpumem=30000), "node1").node_names is None
    w.add_pod(with_init(40000, 5000, DONE))
    assert w.state.quota.used("default") == Usage(1, 5000, 0)
    assert w.filter(manifest("next", gpu=1, gpumem=30000), "node1").node_names == ["node1"]


def test_a_sidecar_keeps_its_share_beside_the_app_after_the_init_containers() -> None:
    w = world(a40_node("node1"))
    w.add_pod(with_init(40000, 5000, DONE, sidecar=2000))
    assert w.usage("node1", CARD) == Usage(2, 7000, 0)


def test_a_grant_with_an_empty_type_field_counts_and_shrinks_after_init() -> None:
    # HAMi's Test_onUpdatePod_InitContainerShrink writes its grants with no type word
    body = with_init(20000, 10000, {"running": {}})
    notes = body["metadata"]["annotations"]
    notes["hami.io/vgpu-devices-allocated"] = f"{CARD},,20000,10:;{CARD},,10000,5:;"
    w = world(a40_node("node1"))
    w.add_pod(signed(body))
    assert w.usage("node1", CARD) == Usage(1, 20000, 10)
    body["status"]["initContainerStatuses"] = [{"name": "setup", "state": DONE}]
    w.add_pod(signed(body))
    assert w.usage("node1", CARD) == Usage(1, 10000, 5)
    assert w.state.quota.used("default") == Usage(1, 10000, 5)
