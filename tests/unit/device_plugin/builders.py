"""A node with two fake GPUs and pods left as vgpu's scheduler leaves them after bind."""

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.adapters.fake.keys import FakeGrantKeys
from vgpu.adapters.fake.kubelet import FakeKubeletCheckpoint
from vgpu.adapters.fake.served import FakeServedRecord
from vgpu.app.device_plugin.allocate_patch import AllocatePatch
from vgpu.app.device_plugin.allocator import Allocator
from vgpu.app.device_plugin.bind_phase import BindPhase
from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.hamicore_answer import HamiCoreAnswers
from vgpu.app.device_plugin.hostdirs import HostDirs
from vgpu.app.device_plugin.keyring import KeyRingCache
from vgpu.app.device_plugin.kubeletholders import KubeletHolders
from vgpu.app.device_plugin.mig_serving import MigServing
from vgpu.app.device_plugin.migmanager import MigManager
from vgpu.app.device_plugin.nodeledger import NodeLedger
from vgpu.app.device_plugin.pod_search import PodSearch
from vgpu.app.device_plugin.segments import Segments
from vgpu.app.device_plugin.served import ServedRecord
from vgpu.app.device_plugin.served_recorder import ServedRecorder
from vgpu.app.device_plugin.trust import NodeGrantTrust
from vgpu.domain.allocation import AllocationConfig
from vgpu.domain.inventory import GpuInfo, SharingConfig
from vgpu.domain.node import ClusterNode
from vgpu.domain.pod import Container, Pod
from vgpu.domain.trust import (
    GRANT_SIGNATURE_ANNOTATION,
    GrantClaim,
    KeyRing,
    NamedSchedulers,
    Signatures,
)
from vgpu.domain.vendor import NVIDIA
from vgpu.ports.served import ServedRecordPort

NODE = "gpu-node-1"
UUID_A = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
UUID_B = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
RING = KeyRing({"2026-01": b"a" * 32})
ASSIGNED_TIME = "1700000000"
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
    allocated: str | None = None,
    ring: KeyRing | None = RING,
    scheduler: str = "vgpu-scheduler",
    **annotations: str,
) -> Pod:
    """A Pending pod bound to `node` with `grants` as hami.io/vgpu-devices-to-allocate.

    `allocated` (default: `grants`) is hami.io/vgpu-devices-allocated, signed with `ring` as
    the scheduler signs it (no signature when `ring` is None); `annotations` come last.
    """
    allocated = grants if allocated is None else allocated
    uid = f"uid-{name}"
    values = {
        "hami.io/vgpu-node": node,
        "hami.io/vgpu-time": ASSIGNED_TIME,
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": str(bind_time),
        NVIDIA.to_allocate_annotation: grants,
        NVIDIA.allocated_annotation: allocated,
    }
    if ring is not None:
        claim = GrantClaim(uid, node, ASSIGNED_TIME, allocated)
        values[GRANT_SIGNATURE_ANNOTATION] = ring.sign(claim)
    values.update(annotations)
    return Pod(
        namespace=namespace,
        name=name,
        uid=uid,
        annotations=values,
        containers=containers or (Container("main", limits={"nvidia.com/gpu": 1}),),
        node_name=node,
        scheduler_name=scheduler,
    )


@dataclass
class World:
    cluster: FakeCluster
    gpus: GpuState
    allocator: Allocator
    hook: Path
    keys: FakeGrantKeys
    clock: list[float]  # [now] of the key ring's monotonic clock; tests move it on
    trust: NodeGrantTrust
    ledger: NodeLedger
    served: ServedRecord
    record: ServedRecordPort  # where `served` keeps its entries
    checkpoint: FakeKubeletCheckpoint

    def advance(self, seconds: float) -> None:
        self.clock[0] += seconds

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


def world(
    tmp_path: Path,
    split_count: int = 10,
    *,
    signing: bool = True,
    trusted_schedulers: frozenset[str] = frozenset({"vgpu-scheduler"}),
    settle_s: float = 0.0,
    sleep: Callable[[float], None] = lambda seconds: None,
    unsigned_from: frozenset[str] = frozenset(),
    record: ServedRecordPort | None = None,
    **config: Any,
) -> World:
    """The allocator of node NODE with two GPUs; grants signed with RING unless signing is off
    (or, taking over, unsigned on pods naming a scheduler in `unsigned_from`). `record`: where
    the served record is kept (default: in memory)."""
    cluster = FakeCluster()
    cluster.put_node(ClusterNode(name=NODE))
    gpus = GpuState(GPUS, SharingConfig(split_count=split_count))
    hook = tmp_path / "hook"
    allocation = AllocationConfig(hook_path=str(hook), **config)
    host = HostDirs(str(hook), lock_dir=str(tmp_path / "vgpulock"))
    keys = FakeGrantKeys(RING)
    clock = [0.0]
    ring = KeyRingCache(keys, "the fake key store", clock=lambda: clock[0])
    rule = Signatures(ring, unsigned_from) if signing else NamedSchedulers(trusted_schedulers)
    trust = NodeGrantTrust(rule, NODE, NVIDIA)
    record = FakeServedRecord() if record is None else record
    served = ServedRecord(record, NODE, clock=lambda: "2026-01-01T00:00:00Z")
    checkpoint = FakeKubeletCheckpoint()
    holders = KubeletHolders(checkpoint, gpus, NVIDIA.count_resource)
    ledger = NodeLedger(cluster, gpus, NODE, NVIDIA, trust, served, holders)
    allocator = allocator_of(
        cluster, gpus, trust, ledger, served, allocation, host, settle_s=settle_s, sleep=sleep
    )
    return World(
        cluster, gpus, allocator, hook, keys, clock, trust, ledger, served, record, checkpoint
    )


def allocator_of(
    cluster: FakeCluster,
    gpus: GpuState,
    trust: NodeGrantTrust,
    ledger: NodeLedger,
    served: ServedRecord,
    allocation: AllocationConfig,
    host: HostDirs,
    *,
    settle_s: float = 0.0,
    sleep: Callable[[float], None] = lambda seconds: None,
    mig: MigManager | None = None,
) -> Allocator:
    """The allocator of node NODE, composed as the container composes it; cache ids count up
    (`cache0`, `cache1`, ...)."""
    ids = (f"cache{i}" for i in itertools.count())
    return Allocator(
        NVIDIA,
        PodSearch(cluster, NODE, NVIDIA, trust, settle_s, sleep),
        ledger,
        Segments(gpus, NVIDIA),
        HamiCoreAnswers(allocation, host, NVIDIA, lambda: next(ids)),
        MigServing(gpus, mig),
        ServedRecorder(served, trust),
        AllocatePatch(cluster, NVIDIA),
        BindPhase(cluster, NODE),
    )
