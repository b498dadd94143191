"""The real scheduler runs HAMi's node handshake against the API emulator: it stamps nodes,
drops the GPUs of a node whose device plugin stopped counting, and takes them back."""

from pathlib import Path
from typing import Any

from tests.e2e.k8s_emulator import RunningApiServer, node_manifest
from tests.e2e.scheduler.conftest import Launch
from tests.e2e.scheduler.harness import wait_until
from tests.e2e.scheduler.test_kubernetes import A40_REGISTER, NODES, create_pod, start

HANDSHAKE = "hami.io/node-handshake"


def node_annotations(api: RunningApiServer) -> dict[str, str]:
    stored = api.get(f"{NODES}/node1")
    assert stored is not None
    found: dict[str, str] = stored["metadata"].get("annotations") or {}
    return found


def set_allocatable(api: RunningApiServer, count: int) -> None:
    api.merge_patch(f"{NODES}/node1", {"status": {"allocatable": {"nvidia.com/gpu": str(count)}}})


def add_node(api: RunningApiServer) -> None:
    api.create(
        NODES,
        node_manifest(
            "node1",
            annotations={"hami.io/node-nvidia-register": A40_REGISTER},
            allocatable={"nvidia.com/gpu": "20"},
        ),
    )


def test_the_leader_stamps_each_node_under_v2_10(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    add_node(k8s_api)
    start(launch, k8s_api, tmp_path, handshake_period="0.2")
    assert wait_until(lambda: HANDSHAKE in node_annotations(k8s_api))
    assert node_annotations(k8s_api)[HANDSHAKE].startswith("Requesting_")


def test_a_node_whose_plugin_left_is_refused_with_a_reason_until_it_is_back(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    add_node(k8s_api)
    scheduler = start(launch, k8s_api, tmp_path, handshake_period="0.2", hami_version="v2.9")
    pod = create_pod(k8s_api, scheduler, "p", gpu=1, gpumem=1000)

    def placed() -> Any:
        return scheduler.filter(pod, ["node1"])

    # the stamp shows a pass has seen the node's GPUs counted
    assert wait_until(lambda: HANDSHAKE in node_annotations(k8s_api))
    assert placed()["NodeNames"] == ["node1"]
    set_allocatable(k8s_api, 0)  # kubelet lost the device plugin
    assert wait_until(lambda: placed()["NodeNames"] is None)
    assert "device plugin stopped reporting" in placed()["FailedNodes"]["node1"]
    assert node_annotations(k8s_api)[HANDSHAKE].startswith("Deleted_")
    set_allocatable(k8s_api, 20)
    assert wait_until(lambda: placed()["NodeNames"] == ["node1"])
