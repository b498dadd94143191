import json
import threading

from tests.unit.device_plugin.builders import GPUS, NODE, UUID_A, UUID_B
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.registrar import NodeRegistrar
from vgpu.domain.inventory import HealthEvent, SharingConfig
from vgpu.domain.node import ClusterNode
from vgpu.domain.vendor import NVIDIA

KEY = NVIDIA.register_annotation


class CountingCluster(FakeCluster):
    def __init__(self) -> None:
        super().__init__()
        self.node_patches = 0

    def patch_node_annotations(self, name: str, annotations: object) -> None:
        self.node_patches += 1
        super().patch_node_annotations(name, annotations)  # type: ignore[arg-type]


def _setup(
    split: int = 10, scaling: float = 1.0
) -> tuple[CountingCluster, GpuState, NodeRegistrar]:
    cluster = CountingCluster()
    cluster.put_node(ClusterNode(name=NODE))
    gpus = GpuState(GPUS, SharingConfig(split_count=split, memory_scaling=scaling))
    return cluster, gpus, NodeRegistrar(cluster, gpus, NODE, NVIDIA)


def _registered(cluster: FakeCluster) -> list[dict[str, object]]:
    node = cluster.get_node(NODE)
    assert node is not None
    value: list[dict[str, object]] = json.loads(node.annotations[KEY])
    return value


def test_sync_writes_hamis_json_with_split_count_and_scaling() -> None:
    cluster, _, registrar = _setup(split=4, scaling=2)

    assert registrar.sync()

    node = cluster.get_node(NODE)
    assert node is not None
    assert node.annotations[KEY] == (
        f'[{{"id":"{UUID_A}","count":4,"devmem":65536,"devcore":100,'
        '"type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core","health":true},'
        f'{{"id":"{UUID_B}","index":1,"count":4,"devmem":65536,"devcore":100,'
        '"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true}]'
    )


def test_an_unchanged_annotation_is_not_patched_again_but_a_removed_one_is() -> None:
    cluster, _, registrar = _setup()
    registrar.sync()
    registrar.sync()
    assert cluster.node_patches == 1

    cluster.patch_node_annotations(NODE, {KEY: None})
    registrar.sync()
    assert [d["id"] for d in _registered(cluster)] == [UUID_A, UUID_B]


def test_a_health_change_is_published() -> None:
    cluster, gpus, registrar = _setup()
    registrar.sync()

    gpus.apply([HealthEvent(UUID_A, healthy=False)])
    registrar.sync()

    assert [d.get("health", False) for d in _registered(cluster)] == [False, True]


def test_a_missing_node_is_reported_not_raised() -> None:
    cluster = FakeCluster()
    registrar = NodeRegistrar(cluster, GpuState(GPUS, SharingConfig()), "ghost", NVIDIA)
    assert registrar.sync() is False


def test_run_returns_when_stopped() -> None:
    cluster, _, registrar = _setup()
    stop = threading.Event()
    stop.set()
    registrar.run(stop)
    assert cluster.node_patches == 0
