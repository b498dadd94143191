"""A node with two A100s in MIG mode (fake), its allocator and MIG manager, and pods as vgpu's
scheduler leaves them after placing MIG devices (grant and reservations signed)."""

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from tests.unit.device_plugin.builders import ASSIGNED_TIME, NODE, RING, allocator_of
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.adapters.fake.gpus import FakeGpus
from vgpu.adapters.fake.keys import FakeGrantKeys
from vgpu.adapters.fake.kubelet import FakeKubeletCheckpoint
from vgpu.adapters.fake.served import FakeServedRecord
from vgpu.app.device_plugin.allocator import Allocator
from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.hostdirs import HostDirs
from vgpu.app.device_plugin.keyring import KeyRingCache
from vgpu.app.device_plugin.kubeletholders import KubeletHolders
from vgpu.app.device_plugin.migmanager import MigManager
from vgpu.app.device_plugin.nodeledger import NodeLedger
from vgpu.app.device_plugin.served import ServedRecord
from vgpu.app.device_plugin.trust import NodeGrantTrust
from vgpu.domain.allocation import AllocationConfig
from vgpu.domain.inventory import GpuInfo, SharingConfig
from vgpu.domain.mig import (
    MIG_ALLOCATIONS_ANNOTATION,
    MigPlacement,
    MigProfile,
    MigReservation,
    encode_mig_allocations,
)
from vgpu.domain.node import ClusterNode
from vgpu.domain.pod import Container, Pod
from vgpu.domain.trust import GRANT_SIGNATURE_ANNOTATION, Signatures, grant_claim
from vgpu.domain.vendor import NVIDIA

MIG_A = "GPU-aaaaaaaa-0000-0000-0000-000000000001"
MIG_B = "GPU-bbbbbbbb-0000-0000-0000-000000000002"
SHARED = "GPU-cccccccc-0000-0000-0000-000000000003"
A100 = "NVIDIA A100-SXM4-40GB"
PROFILES = (
    MigProfile("1g.5gb", 1, 4864, 15, tuple(MigPlacement(i, 1) for i in range(7)), instances=7),
    MigProfile("3g.20gb", 3, 19968, 43, (MigPlacement(0, 4), MigPlacement(4, 4)), instances=2),
)
GPUS = (
    GpuInfo(MIG_A, 0, A100, 40960, mig_enabled=True),
    GpuInfo(MIG_B, 1, A100, 40960, mig_enabled=True),
    GpuInfo(SHARED, 2, "Tesla V100-PCIE-32GB", 32768),
)


def reserve(
    container: int, device: int, gpu: str, profile: str, start: int, size: int
) -> MigReservation:
    return MigReservation(container, device, gpu, profile, MigPlacement(start, size))


def mig_pod(
    grants: str,
    reservations: list[MigReservation],
    *containers: Container,
    name: str = "train",
    phase: str = "Pending",
    bind_phase: str = "allocating",
) -> Pod:
    """A pod bound to NODE with `grants` (to allocate and allocated) and `reservations`, the
    whole signed with RING as vgpu's scheduler signs it."""
    uid = f"uid-{name}"
    annotations = {
        "hami.io/vgpu-node": NODE,
        "hami.io/vgpu-time": ASSIGNED_TIME,
        "hami.io/bind-phase": bind_phase,
        "hami.io/bind-time": "1700000000",
        NVIDIA.to_allocate_annotation: grants,
        NVIDIA.allocated_annotation: grants,
        MIG_ALLOCATIONS_ANNOTATION: encode_mig_allocations(reservations),
    }
    claim = grant_claim(uid, annotations, NVIDIA)
    assert claim is not None
    annotations[GRANT_SIGNATURE_ANNOTATION] = RING.sign(claim)
    return Pod(
        namespace="default",
        name=name,
        uid=uid,
        annotations=annotations,
        containers=containers or (Container("main", limits={"nvidia.com/gpu": 1}),),
        node_name=NODE,
        scheduler_name="vgpu-scheduler",
        phase=phase,
    )


@dataclass
class MigWorld:
    cluster: FakeCluster
    fake: FakeGpus
    gpus: GpuState
    mig: MigManager
    allocator: Allocator
    trust: NodeGrantTrust
    record: FakeServedRecord  # where the served record is kept

    def put(self, pod: Pod) -> Pod:
        stored = self.cluster.put_pod(pod)
        self.cluster.lock_node(NODE, pod.namespace, pod.name, timedelta(minutes=5))
        return stored

    def pod(self, name: str = "train") -> Pod:
        found = self.cluster.get_pod("default", name)
        assert found is not None
        return found

    def live(self) -> list[tuple[str, str, int, int]]:
        """The fake's instances as (GPU, profile, start, size), sorted."""
        return sorted(
            (i.gpu_uuid, i.profile, i.placement.start, i.placement.size)
            for i in self.fake.mig_instances()
        )


def mig_world(
    tmp_path: Path, fake: FakeGpus | None = None, cluster: FakeCluster | None = None
) -> MigWorld:
    cluster = cluster or FakeCluster()
    cluster.put_node(ClusterNode(name=NODE))
    fake = fake or FakeGpus(GPUS, mig_profiles={MIG_A: PROFILES, MIG_B: PROFILES})
    gpus = GpuState(GPUS, SharingConfig(split_count=7), mig_profiles=fake.mig_profiles())
    ring = KeyRingCache(FakeGrantKeys(RING), "the fake key store", clock=lambda: 0.0)
    trust = NodeGrantTrust(Signatures(ring), NODE, NVIDIA)
    record = FakeServedRecord()
    served = ServedRecord(record, NODE)
    mig = MigManager(fake, cluster, NODE, gpus, trust, served)
    holders = KubeletHolders(FakeKubeletCheckpoint(), gpus, NVIDIA.count_resource)
    allocation = AllocationConfig(hook_path=str(tmp_path / "hook"))
    host = HostDirs(str(tmp_path / "hook"), lock_dir=str(tmp_path / "vgpulock"))
    ledger = NodeLedger(cluster, gpus, NODE, NVIDIA, trust, served, holders)
    allocator = allocator_of(cluster, gpus, trust, ledger, served, allocation, host, mig=mig)
    return MigWorld(cluster, fake, gpus, mig, allocator, trust, record)
