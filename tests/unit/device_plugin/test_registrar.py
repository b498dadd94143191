import json
import threading
from datetime import UTC, datetime

import pytest

from tests.unit.device_plugin.builders import GPUS, NODE, UUID_A, UUID_B
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.registrar import NodeRegistrar
from vgpu.app.device_plugin.topology import TopologyScores
from vgpu.domain.inventory import HealthEvent, SharingConfig
from vgpu.domain.node import ClusterNode
from vgpu.domain.topology import GpuLink, PcieLink
from vgpu.domain.vendor import NVIDIA
from vgpu.ports.gpu import GpuUnavailable

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


HANDSHAKE = "hami.io/node-handshake"
SCORES = "hami.io/node-nvidia-score"
T0 = datetime(2026, 8, 21, 6, 20, 39, 5, tzinfo=UTC)


def _handshake(cluster: FakeCluster) -> str | None:
    node = cluster.get_node(NODE)
    assert node is not None
    return node.annotations.get(HANDSHAKE)


def test_the_first_registration_reports_on_the_handshake() -> None:
    cluster, gpus, _ = _setup()
    NodeRegistrar(cluster, gpus, NODE, NVIDIA, clock=lambda: T0).sync()
    assert _handshake(cluster) == "Reported 2026-08-21 06:20:39.000005 +0000 UTC"
    assert cluster.node_patches == 1  # one merge patch carries both keys


@pytest.mark.parametrize(
    "marker", ["Requesting_2026-08-21 06:20:40", "Deleted_2026-08-21 06:20:40"]
)
def test_a_schedulers_marker_is_answered_at_the_next_sync(marker: str) -> None:
    cluster, gpus, _ = _setup()
    registrar = NodeRegistrar(cluster, gpus, NODE, NVIDIA, clock=lambda: T0)
    registrar.sync()
    cluster.patch_node_annotations(NODE, {HANDSHAKE: marker})
    registrar.sync()
    assert (_handshake(cluster) or "").startswith("Reported ")


def test_a_reported_handshake_is_left_alone_until_the_gpus_change() -> None:
    cluster, gpus, _ = _setup()
    registrar = NodeRegistrar(cluster, gpus, NODE, NVIDIA, clock=lambda: T0)
    registrar.sync()
    cluster.patch_node_annotations(NODE, {HANDSHAKE: "Reported earlier"})
    registrar.sync()
    assert _handshake(cluster) == "Reported earlier" and cluster.node_patches == 2
    gpus.apply([HealthEvent(UUID_A, healthy=False)])  # v2.9 re-reads cards only on a new value
    registrar.sync()
    assert _handshake(cluster) == "Reported 2026-08-21 06:20:39.000005 +0000 UTC"


def test_the_handshake_can_be_left_to_the_scheduler() -> None:
    cluster, gpus, _ = _setup()
    NodeRegistrar(cluster, gpus, NODE, NVIDIA, report_handshake=False).sync()
    assert _handshake(cluster) is None


class _Topology:
    def __init__(self, links: list[GpuLink] | None) -> None:
        self.links = links
        self.reads = 0

    def read_topology(self) -> list[GpuLink]:
        self.reads += 1
        if self.links is None:
            raise GpuUnavailable("NVML could not read the GPU topology (Unknown Error)")
        return self.links


def _scored(port: _Topology) -> tuple[CountingCluster, NodeRegistrar]:
    cluster, gpus, _ = _setup()
    scores = TopologyScores(port)  # type: ignore[arg-type]
    return cluster, NodeRegistrar(cluster, gpus, NODE, NVIDIA, topology=scores)


def test_topology_scores_are_published_with_the_registration() -> None:
    port = _Topology(
        [
            GpuLink(UUID_A, UUID_B, PcieLink.SINGLE_SWITCH, 4),
            GpuLink(UUID_B, UUID_A, PcieLink.SINGLE_SWITCH, 4),
            GpuLink(UUID_A, "GPU-filtered-out", PcieLink.SAME_BOARD, 2),
        ]
    )
    cluster, registrar = _scored(port)
    assert registrar.sync()
    registrar.sync()
    node = cluster.get_node(NODE)
    assert node is not None
    assert node.annotations[SCORES] == (
        f'[{{"uuid":"{UUID_A}","score":{{"{UUID_B}":450}}}},'
        f'{{"uuid":"{UUID_B}","score":{{"{UUID_A}":450}}}}]'
    )
    assert port.reads == 1 and cluster.node_patches == 1


def test_an_unreadable_topology_still_registers_and_is_retried() -> None:
    port = _Topology(None)
    cluster, registrar = _scored(port)
    assert registrar.sync() is False  # retried sooner
    assert registrar.sync() is False  # also when nothing else needs writing
    node = cluster.get_node(NODE)
    assert node is not None and KEY in node.annotations and SCORES not in node.annotations
    port.links = []
    assert registrar.sync()
    node = cluster.get_node(NODE)
    assert node is not None and SCORES in node.annotations
