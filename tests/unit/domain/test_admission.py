from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import pytest

from tests.unit.domain.builders import container, manifest
from vgpu.domain import AdmissionConfig, Budget, admit
from vgpu.domain.trust.scheduler_owned import is_scheduler_owned_annotation

CONFIG = AdmissionConfig(scheduler_name="vgpu-scheduler")


def ops(decision: Any) -> dict[str, Any]:
    return {op["path"]: op["value"] for op in decision.patch}


def test_gpu_pod_is_sent_to_our_scheduler() -> None:
    decision = admit(manifest(container(gpu=1, mem=1000)), CONFIG)
    assert decision.allowed
    assert ops(decision)["/spec/schedulerName"] == "vgpu-scheduler"
    assert all(op["op"] == "add" for op in decision.patch)


def test_pod_without_gpu_is_left_alone() -> None:
    decision = admit(manifest(container(cpu="1")), CONFIG)
    assert decision.allowed and not decision.mutates


def test_pod_for_another_scheduler_is_left_alone() -> None:
    decision = admit(manifest(container(gpu=1), schedulerName="volcano"), CONFIG)
    assert decision.allowed and not decision.mutates
    taken = admit(manifest(container(gpu=1), schedulerName="default-scheduler"), CONFIG)
    assert ops(taken)["/spec/schedulerName"] == "vgpu-scheduler"


def test_pod_with_node_assigned_is_denied() -> None:
    decision = admit(manifest(container(gpu=1), nodeName="node-a"), CONFIG)
    assert not decision.allowed and "node 'node-a' assigned" in decision.message


def test_privileged_gpu_container_is_denied_with_a_clear_message() -> None:
    raw = container("cuda", gpu=1)
    raw["securityContext"] = {"privileged": True}
    decision = admit(manifest(raw), CONFIG)
    assert not decision.allowed
    assert "container 'cuda' is privileged" in decision.message


def test_invalid_quantity_is_denied_with_the_parse_error() -> None:
    decision = admit(manifest(container("cuda", gpu=1, pct=150)), CONFIG)
    assert not decision.allowed
    assert "nvidia.com/gpumem-percentage=150" in decision.message and "'cuda'" in decision.message


def test_no_containers_is_denied() -> None:
    decision = admit({"metadata": {"name": "p"}, "spec": {"containers": []}}, CONFIG)
    assert not decision.allowed and decision.message == "pod has no containers"


def test_priority_becomes_an_env_and_defaults_are_added() -> None:
    decision = admit(manifest(container(mem=1000, priority=1)), CONFIG)
    patch = ops(decision)
    assert patch["/spec/containers/0/env"] == [{"name": "CUDA_TASK_PRIORITY", "value": "1"}]
    assert patch["/spec/containers/0/resources/limits/nvidia.com~1gpu"] == "1"


def test_gpu_alone_becomes_an_exclusive_card_as_in_hami() -> None:
    patch = ops(admit(manifest(container(gpu=1)), CONFIG))
    assert patch["/spec/containers/0/resources/limits/nvidia.com~1gpucores"] == "100"
    shared = ops(admit(manifest(container(gpu=1, mem=1000)), CONFIG))
    assert "/spec/containers/0/resources/limits/nvidia.com~1gpucores" not in shared


def test_env_is_appended_to_an_existing_list_and_init_containers_are_patched() -> None:
    app = container("app", mem=100)
    app["env"] = [{"name": "A", "value": "1"}]
    init = container("setup", init=True, gpu=1, mem=10, priority=0)
    patch = admit(
        manifest(init, app, annotations={}), AdmissionConfig(gpu_core_policy="force")
    ).patch
    paths = [op["path"] for op in patch]
    assert "/spec/containers/0/env/-" in paths
    assert "/spec/initContainers/0/env" in paths


def test_quota_is_checked_at_admission() -> None:
    decision = admit(manifest(container(gpu=2, mem=3000)), CONFIG, Budget(memory=5000))
    assert not decision.allowed
    assert (
        "exceeding resource quota" in decision.message
        and "memory 6000 MiB > 5000 MiB left" in decision.message
    )


def test_overwrite_env_hides_gpus_from_containers_without_a_request() -> None:
    config = AdmissionConfig(overwrite_env=True)
    patch = ops(admit(manifest(container("gpu", gpu=1, mem=10), container("sidecar")), config))
    assert patch["/spec/containers/1/env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]


def test_malformed_pod_parts_are_denied_not_raised() -> None:
    decision = admit({"metadata": {"name": "p"}, "spec": {"containers": ["oops"]}}, CONFIG)
    assert not decision.allowed and "container must be an object" in decision.message


FORGED = {
    "hami.io/vgpu-node": "node-a",
    "hami.io/vgpu-time": "0",
    "hami.io/vgpu-devices-to-allocate": "GPU-a,NVIDIA,32768,100:;",
    "hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,32768,100:;",
    "hami.io/vgpu-mig-allocations": "[]",
    "hami.io/bind-phase": "allocating",
    "hami.io/bind-time": "0",
    "hami.io/dcu-devices-to-allocate": "DCU-a,DCU,1,1:;",
    "vgpu.io/grant-signature": "k1:forged",
}
TENANT_OWN = {
    "hami.io/gpu-scheduler-policy": "spread",
    "hami.io/node-scheduler-policy": "binpack",
    "nvidia.com/use-gputype": "A40",
    "team": "ml",
}


def forged(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    pod = manifest(*containers, annotations={**FORGED, **TENANT_OWN}, **spec)
    pod["metadata"]["labels"] = {"hami.io/vgpu-node": "node-a", "hami.io/webhook": "ignore"}
    return pod


def admitted(pod: dict[str, Any], decision: Any) -> dict[str, Any]:
    """The pod as the API server stores it after applying the decision's JSON patch."""
    assert decision.allowed
    result: dict[str, Any] = jsonpatch.apply_patch(pod, list(decision.patch))
    return result


@pytest.mark.parametrize(
    ("case", "pod"),
    [
        ("GPU pod", forged(container(gpu=1, mem=1000))),
        ("pod asking for no GPU", forged(container(cpu="1"))),
        ("pod for another scheduler", forged(container(gpu=1), schedulerName="volcano")),
    ],
)
def test_scheduler_owned_annotations_and_label_are_removed_from_every_pod(
    case: str, pod: dict[str, Any]
) -> None:
    decision = admit(pod, CONFIG)
    stored = admitted(pod, decision)

    assert stored["metadata"]["annotations"] == TENANT_OWN, case
    assert stored["metadata"]["labels"] == {"hami.io/webhook": "ignore"}, case
    assert "/metadata/annotations/hami.io~1vgpu-devices-allocated" in {
        op["path"] for op in decision.patch
    }
    assert "removed scheduler-owned annotations hami.io/vgpu-node, hami.io/vgpu-time," in (
        decision.message
    )
    assert decision.message.endswith("vgpu.io/grant-signature; labels hami.io/vgpu-node")


def test_a_clean_pod_gets_no_removals() -> None:
    pod = manifest(container(gpu=1), annotations=dict(TENANT_OWN))
    decision = admit(pod, CONFIG)
    assert all(op["op"] == "add" for op in decision.patch)
    assert decision.message == "pod sent to vgpu-scheduler"
    assert admitted(pod, decision)["metadata"]["annotations"] == TENANT_OWN


def test_a_denied_pod_stays_denied_whatever_it_carries() -> None:
    decision = admit(forged(container(gpu=1), nodeName="node-a"), CONFIG)
    assert not decision.allowed and not decision.patch
    assert "node 'node-a' assigned" in decision.message


@pytest.mark.parametrize(
    ("key", "owned"),
    [
        ("hami.io/vgpu-node", True),
        ("hami.io/vgpu-devices-to-allocate", True),
        ("hami.io/vgpu-anything-new", True),
        ("hami.io/bind-phase", True),
        ("hami.io/cambricon-mlu-devices-allocated", True),
        ("hami.io/metax-sgpu-devices-to-allocate", True),
        ("vgpu.io/grant-signature", True),
        ("hami.io/gpu-scheduler-policy", False),
        ("hami.io/node-scheduler-policy", False),
        ("hami.io/device-scoring-weights", False),
        ("hami.io/webhook", False),
        ("nvidia.com/use-gpuuuid", False),
        ("example.com/vgpu-node", False),
        ("example.com/x-devices-y", False),
    ],
)
def test_which_annotations_the_scheduler_owns(key: str, owned: bool) -> None:
    assert is_scheduler_owned_annotation(key) is owned
