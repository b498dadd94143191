from typing import Any

from tests.unit.domain.builders import container, manifest
from vgpu.domain import AdmissionConfig, Budget, admit

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
