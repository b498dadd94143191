"""The node's ResourceSlice (written only on change, generation bumped, never one the API
server would refuse), GPU health in the slice and on the kubelet's stream, and the settings."""

import copy
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.unit.dra_driver.node import DRIVER, NODE, UUID_A, UUID_B, DraNode, make_node
from vgpu.adapters.fake.dra import FakeDraApi
from vgpu.app.dra_driver.config import DraDriverConfig, load_config
from vgpu.app.errors import ConfigError
from vgpu.domain.dra import parse_resource_slice
from vgpu.domain.inventory import GpuInfo


@pytest.fixture()
def node(tmp_path: Path) -> DraNode:
    return make_node(tmp_path)


def _published(node: DraNode) -> list[dict[str, object]]:
    return node.api.list_slices(DRIVER, NODE)


def _health(node: DraNode) -> None:
    node.container.gpus().apply(node.gpus.wait_for_health_events(0))


def test_the_first_round_publishes_one_valid_slice_with_every_gpu(node: DraNode) -> None:
    publisher = node.container.publisher()

    assert publisher.publish()

    [manifest] = _published(node)
    read = parse_resource_slice(manifest)
    assert (read.name, read.node_name, read.pool.name, read.pool.generation) == (
        "gpu-node-1-gpu.vgpu.io", NODE, NODE, 1
    )
    assert [d.name for d in read.devices] == ["gpu-0", "gpu-1"]
    gpu = read.devices[0]
    assert gpu.allow_multiple_allocations
    assert gpu.attributes["uuid"] == UUID_A
    assert gpu.capacity["memory"].value == 32768 * 2**20
    assert gpu.capacity["cores"].policy is not None
    assert publisher.writes == 1


def test_rounds_with_nothing_changed_write_nothing(node: DraNode) -> None:
    publisher = node.container.publisher()
    for _ in range(5):
        publisher.publish()
    assert publisher.writes == 1 == node.api.writes


def test_an_unhealthy_gpu_leaves_the_slice_under_a_new_generation_and_comes_back(
    node: DraNode,
) -> None:
    publisher = node.container.publisher()
    publisher.publish()

    node.gpus.mark_unhealthy(UUID_B, "Xid 48 (double-bit ECC error)")
    _health(node)
    publisher.publish()
    read = parse_resource_slice(_published(node)[0])
    assert ([d.name for d in read.devices], read.pool.generation) == (["gpu-0"], 2)

    node.gpus.mark_healthy(UUID_B)
    _health(node)
    publisher.publish()
    read = parse_resource_slice(_published(node)[0])
    assert ([d.name for d in read.devices], read.pool.generation) == (["gpu-0", "gpu-1"], 3)
    assert publisher.writes == 3


def test_a_slice_edited_or_left_by_others_is_put_right(node: DraNode) -> None:
    publisher = node.container.publisher()
    publisher.publish()
    [mine] = _published(node)
    mine["spec"]["devices"] = []  # type: ignore[index]
    node.api.replace_slice(mine)
    node.api.create_slice({"metadata": {"name": "old-name"},
                           "spec": {"driver": DRIVER, "nodeName": NODE,
                                    "pool": {"name": NODE, "generation": 7}}})

    publisher.publish()

    [only] = _published(node)
    read = parse_resource_slice(only)
    assert [d.name for d in read.devices] == ["gpu-0", "gpu-1"]
    assert read.pool.generation == 8  # above every generation seen


def test_a_slice_the_api_server_would_refuse_is_not_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # a 1 MiB GPU: HAMi's memory policy (1Mi..total, step 1Mi) breaks `min + step <= value`
    node = make_node(tmp_path, (GpuInfo(UUID_A, 0, "Tesla V100-PCIE-32GB", 1),))
    publisher = node.container.publisher()

    assert not publisher.publish()

    assert "not publishing ResourceSlice gpu-node-1-gpu.vgpu.io: the API server would refuse " \
        "it: spec.devices[0].capacity[memory].requestPolicy.validRange.step" in caplog.text

    assert (publisher.writes, publisher.refused, _published(node)) == (0, 1, [])


def test_the_health_stream_sends_every_gpu_then_each_change(node: DraNode) -> None:
    service = node.container.service()
    stop = threading.Event()
    stream = service.watch_health(lambda: not stop.is_set())

    first = next(stream)
    assert [(r.device, r.healthy) for r in first] == [("gpu-0", True), ("gpu-1", True)]
    node.gpus.mark_unhealthy(UUID_A, "Xid 79")
    _health(node)
    [change] = next(stream)
    assert (change.pool, change.device, change.healthy, change.message) == (
        NODE, "gpu-0", False, "Xid 79"
    )
    stop.set()
    assert list(stream) == []


def test_settings_have_the_kubelets_defaults_and_refuse_bad_names() -> None:
    config = load_config(env={"NODE_NAME": "n1", "HOOK_PATH": "/opt/hook"})
    assert (config.driver_name, config.plugin_path, config.registry_dir, config.cdi_dir) == (
        "gpu.vgpu.io",
        Path("/var/lib/kubelet/plugins/gpu.vgpu.io"),
        Path("/var/lib/kubelet/plugins_registry"),
        Path("/var/run/cdi"),
    )
    assert config.hook_path == "/opt/hook"
    assert load_config(env={"NODE_NAME": "n1", "VGPU_DRIVER_NAME": "gpu.example.com"}).plugin_path == (
        Path("/var/lib/kubelet/plugins/gpu.example.com")
    )
    with pytest.raises(ConfigError, match="driver_name"):
        load_config(overrides={"node_name": "n1", "driver_name": "GPU_vgpu"})
    with pytest.raises(ConfigError, match="gpu_visibility"):
        load_config(overrides={"node_name": "n1", "gpu_visibility": "magic"})
    with pytest.raises(ConfigError, match="node_name is required"):
        load_config(env={})
    assert DraDriverConfig(node_name="n").state_dir == Path("/var/lib/vgpu")  # served.json's


class _WithoutConsumableCapacity(FakeDraApi):
    """An API server with DRAConsumableCapacity off: it drops the fields of the gate."""

    def _store_slice(self, name: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
        stripped = copy.deepcopy(dict(manifest))
        for device in stripped["spec"].get("devices", []):
            device.pop("allowMultipleAllocations", None)
            for capacity in device.get("capacity", {}).values():
                capacity.pop("requestPolicy", None)
        return super()._store_slice(name, stripped)


def test_an_api_server_without_consumable_capacity_is_not_written_to_again_and_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node = make_node(tmp_path)
    api = _WithoutConsumableCapacity()
    node.container.dra_api.override(api)
    publisher = node.container.publisher()

    for _ in range(5):
        publisher.publish()

    assert publisher.writes == 1
    assert "stored ResourceSlice gpu-node-1-gpu.vgpu.io without some of its fields " \
        "(allowMultipleAllocations, requestPolicy): consumable capacity (feature gate " \
        "DRAConsumableCapacity) is off" in caplog.text
    node.gpus.mark_unhealthy(UUID_B, "Xid 79")
    _health(node)
    publisher.publish()
    publisher.publish()
    assert publisher.writes == 2  # a real change is still written, once
