"""A node with two fake GPUs and pods left as vgpu's scheduler leaves them after bind."""

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.app.device_plugin.allocator import Allocator
from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.hostdirs import HostDirs
from vgpu.domain.allocation import AllocationConfig
from vgpu.domain.inventory import GpuInfo, SharingConfig
from vgpu.domain.node import ClusterNode
from vgpu.domain.pod import Container, Pod
from vgpu.domain.vendor import NVIDIA

NODE = "gpu-node-1"
UUID_A = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
UUID_B = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
GPUS = (
    GpuInfo(uuid=UUID_A, index=0, name="Tesla V100-PCIE-32GB", memory_mib=32768, numa=0),
    GpuInfo(uuid=UUID_B, index=1, name="Tesla V100-PCIE-32GB", memory_mib=32768, numa=1),
)


def scheduled_pod(
    grants: str,
    *containers: Container,
    name: str = "train",
    namespace: str = "default",
    node: str = NODE,
    bind_time: int = 1_700_000_000,
    **annotations: str,
) -> Pod:
    """A Pending pod bound to `node` with `grants` as hami.io/vgpu-devices-to-allocate."""
    values = {
        "hami.io/vgpu-node": node,
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": str(bind_time),
        NVIDIA.to_allocate_annotation: grants,
        NVIDIA.allocated_annotation: grants,
    }
    values.update(annotations)
    return Pod(
        namespace=namespace,
        name=name,
        uid=f"uid-{name}",
        annotations=values,
        containers=containers or (Container("main", limits={"nvidia.com/gpu": 1}),),
        node_name=node,
    )


@dataclass
class World:
    cluster: FakeCluster
    gpus: GpuState
    allocator: Allocator
    hook: Path

    def put(self, pod: Pod, *, lock: bool = True) -> Pod:
        stored = self.cluster.put_pod(pod)
        if lock:
            self.cluster.lock_node(NODE, pod.namespace, pod.name, timedelta(minutes=5))
        return stored

    def pod(self, name: str = "train", namespace: str = "default") -> Pod:
        found = self.cluster.get_pod(namespace, name)
        assert found is not None
        return found

    def lock_value(self) -> str | None:
        node = self.cluster.get_node(NODE)
        assert node is not None
        return node.annotations.get("hami.io/mutex.lock")


def world(tmp_path: Path, split_count: int = 10, **config: Any) -> World:
    cluster = FakeCluster()
    cluster.put_node(ClusterNode(name=NODE))
    gpus = GpuState(GPUS, SharingConfig(split_count=split_count))
    hook = tmp_path / "hook"
    allocation = AllocationConfig(hook_path=str(hook), **config)
    host = HostDirs(str(hook), lock_dir=str(tmp_path / "vgpulock"))
    ids = iter(f"cache{i}" for i in range(100))
    allocator = Allocator(cluster, gpus, NODE, allocation, host, NVIDIA, lambda: next(ids))
    return World(cluster, gpus, allocator, hook)
