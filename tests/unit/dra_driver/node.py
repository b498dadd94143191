"""A DRA driver node built by its own container, with in-memory API and cluster, fake GPUs and
its host files in a temporary directory; and builders for the claims a scheduler writes."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.adapters.fake.dra import FakeDraApi
from vgpu.adapters.fake.gpus import FakeGpus
from vgpu.app.dra_driver.config import DraDriverConfig
from vgpu.app.dra_driver.container import DraDriverContainer
from vgpu.domain.dra import (
    AllocationResult,
    ConsumerReference,
    DeviceRequestAllocationResult,
    ResourceClaim,
    resource_claim_json,
)
from vgpu.domain.inventory import GpuInfo
from vgpu.domain.node import ClusterNode
from vgpu.ports.dra import ClaimRef
from vgpu.ports.gpu import GpuPort

NODE = "gpu-node-1"
DRIVER = "gpu.vgpu.io"
MIB = 2**20
UUID_A = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
UUID_B = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"


@dataclass
class DraNode:
    container: DraDriverContainer
    api: FakeDraApi
    cluster: FakeCluster
    gpus: Any  # FakeGpus, unless a GPU port was given
    root: Path

    @property
    def preparer(self) -> Any:
        return self.container.preparer()

    def cdi_dir(self) -> Path:
        return self.root / "cdi"

    def spec(self, uid: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.container.cdi_specs().read(uid)
        return found


TWO_V100 = (
    GpuInfo(UUID_A, 0, "Tesla V100-PCIE-32GB", 32768),
    GpuInfo(UUID_B, 1, "Tesla V100-PCIE-32GB", 32768, numa=1),
)


def make_node(
    root: Path, gpus_on_node: tuple[GpuInfo, ...] | GpuPort = TWO_V100, **settings: Any
) -> DraNode:
    """The node's driver with these fake GPUs (or this GPU port: NVML in the GPU probe)."""
    gpus = FakeGpus(gpus_on_node) if isinstance(gpus_on_node, tuple) else gpus_on_node
    settings = {
        "node_name": NODE,
        "registry_dir": root / "registry",
        "plugin_dir": root / "plugin",
        "cdi_dir": root / "cdi",
        "static_cdi_dirs": (root / "etc-cdi",),
        "state_dir": root / "state",
        "hook_path": str(root / "hook"),
        "lock_dir": str(root / "lock"),
        "device_plugin_dir": root / "device-plugins",
        **settings,
    }
    container = DraDriverContainer(config=DraDriverConfig(**settings))
    api, cluster = FakeDraApi(), FakeCluster()
    cluster.put_node(ClusterNode(NODE, {}))
    container.gpu_port.override(gpus)
    container.dra_api.override(api)
    container.cluster.override(cluster)
    return DraNode(container, api, cluster, gpus, root)


def share(
    device: str = "gpu-0",
    memory_mib: int = 4096,
    cores: int = 30,
    share_id: str | None = "5b1e2d7a-1111-4c5e-9a0b-000000000001",
    request: str = "gpu",
    **kw: Any,
) -> DeviceRequestAllocationResult:
    return DeviceRequestAllocationResult(
        request,
        kw.pop("driver", DRIVER),
        kw.pop("pool", NODE),
        device,
        share_id=share_id,
        consumed_capacity={"memory": memory_mib * MIB, "cores": cores},
        **kw,
    )


def claim_json(
    name: str,
    *results: DeviceRequestAllocationResult,
    uid: str | None = None,
    namespace: str = "ml",
    pods: tuple[tuple[str, str], ...] = (),
    node: str | None = NODE,
) -> dict[str, Any]:
    claim = ResourceClaim(
        name,
        namespace,
        uid or f"uid-{name}",
        allocation=AllocationResult(results or (share(),), node),
        reserved_for=tuple(ConsumerReference("pods", p, u) for p, u in pods),
    )
    return resource_claim_json(claim)


def ref(manifest: dict[str, Any]) -> ClaimRef:
    meta = manifest["metadata"]
    return ClaimRef(meta["namespace"], meta["name"], meta["uid"])
