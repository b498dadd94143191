"""A scheduler service on a FakeCluster, with a hand-driven clock, and pod/node builders."""

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from dependency_injector import providers

from tests.unit.domain.builders import mig_card
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.adapters.fake.keys import FakeGrantKeys
from vgpu.app.scheduler.config import SchedulerConfig
from vgpu.app.scheduler.container import ClusterBackend, SchedulerContainer
from vgpu.app.scheduler.events import MESSAGE_LIMIT
from vgpu.app.scheduler.follower import ClusterFollower
from vgpu.app.scheduler.late_grants import LateGrants
from vgpu.app.scheduler.occupancy import OccupancyBook
from vgpu.app.scheduler.recorder import OccupancyRecorder
from vgpu.app.scheduler.revocation import Revoker
from vgpu.app.scheduler.runtime import SchedulerRuntime
from vgpu.app.scheduler.service import SchedulerService
from vgpu.app.scheduler.state import SchedulerState
from vgpu.domain import NVIDIA, ClusterNode, Device, Usage, encode_node_devices, pod_from_manifest
from vgpu.domain.trust import GRANT_SIGNATURE_ANNOTATION, KeyRing, grant_claim

# The seeds' node: two NVIDIA A40 cards, 46068 MiB each, split 10.
A40_UUIDS = ("GPU-03f69c50-207a-2038-9b45-23cac89cb67d", "GPU-1afede84-4e70-2174-49af-f07ebb94d1ae")
A40_REGISTER = (
    "GPU-03f69c50-207a-2038-9b45-23cac89cb67d,10,46068,100,NVIDIA-NVIDIA A40,0,true:"
    "GPU-1afede84-4e70-2174-49af-f07ebb94d1ae,10,46068,100,NVIDIA-NVIDIA A40,0,true:"
)
START = 1_750_000_000.0
KEYS = KeyRing({"k20260101t0000": b"test-key-".ljust(32, b"x")})  # the test cluster's Secret


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def gpu_node(name: str, cards: int = 4, memory: int = 24000, count: int = 10) -> ClusterNode:
    devices = [
        Device(f"GPU-{name}-{i}", i, "NVIDIA L4", count=count, memory=memory) for i in range(cards)
    ]
    return ClusterNode(name, {NVIDIA.register_annotation: encode_node_devices(devices)})


def a40_node(name: str = "node1") -> ClusterNode:
    return ClusterNode(name, {NVIDIA.register_annotation: A40_REGISTER})


def manifest(
    name: str,
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
    node: str = "",
    phase: str = "Pending",
    uid: str = "",
    **limits: Any,
) -> dict[str, Any]:
    """A pod with one container `main` whose limits are given as gpu=1, gpumem=20000, ..."""
    names = {
        "gpu": "nvidia.com/gpu",
        "gpumem": "nvidia.com/gpumem",
        "gpumem_percentage": "nvidia.com/gpumem-percentage",
        "gpucores": "nvidia.com/gpucores",
        "priority": "nvidia.com/priority",
        "cpu": "cpu",
    }
    container: dict[str, Any] = {"name": "main", "image": "cuda:12"}
    if limits:
        container["resources"] = {"limits": {names[k]: v for k, v in limits.items()}}
    spec: dict[str, Any] = {"containers": [container], "schedulerName": "vgpu-scheduler"}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{name}",
            "annotations": annotations or {},
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def signed(body: dict[str, Any], ring: KeyRing = KEYS) -> dict[str, Any]:
    """The pod with its grant annotations signed, as this scheduler would have written them."""
    meta = body["metadata"]
    claim = grant_claim(meta["uid"], meta["annotations"], NVIDIA)
    assert claim is not None, "signed() needs hami.io/vgpu-node and the allocated annotation"
    meta["annotations"][GRANT_SIGNATURE_ANNOTATION] = ring.sign(claim)
    return body


@dataclass
class World:
    cluster: FakeCluster
    state: SchedulerState
    service: SchedulerService
    runtime: SchedulerRuntime
    clock: Clock
    config: SchedulerConfig
    revoker: Revoker
    leader: list[bool]
    key_store: FakeGrantKeys
    follower: ClusterFollower
    book: OccupancyBook
    recorder: OccupancyRecorder
    late_grants: LateGrants
    container: SchedulerContainer

    def add_pod(self, body: dict[str, Any]) -> None:
        self.cluster.put_pod(pod_from_manifest(body))

    def filter(self, body: dict[str, Any], *nodes: str) -> Any:
        """kube-scheduler's filter for a pod that exists in the cluster (added if missing)."""
        pod = pod_from_manifest(body)
        if self.cluster.get_pod(pod.namespace, pod.name) is None:
            self.cluster.put_pod(pod)
        return self.service.filter(body, list(nodes), None)

    def usage(self, node: str, uuid: str) -> Usage:
        return self.state.ledger.usage(node, uuid)

    def pod_annotations(self, name: str, namespace: str = "default") -> dict[str, str]:
        pod = self.cluster.get_pod(namespace, name)
        assert pod is not None
        return dict(pod.annotations)


def world(
    *nodes: ClusterNode,
    cluster: FakeCluster | None = None,
    leader: bool = True,
    **settings: Any,
) -> World:
    """A synced service following `cluster` (a fresh FakeCluster with `nodes` by default),
    wired by the scheduler's container; Events are written at once (no queue to drain), and no
    explanations are kept (messages do not point at `vgpu explain`).

    `w.leader[0] = False` makes the replica a follower from then on."""
    config = SchedulerConfig.model_validate(settings)
    clock = Clock()
    leading = [leader]
    fake = cluster if cluster is not None else FakeCluster()
    for node in nodes:
        fake.put_node(node)
    key_store = FakeGrantKeys(KEYS)
    container = SchedulerContainer(config=config, clock=providers.Object(clock))
    backend = ClusterBackend(fake, key_store, leadership=_Leadership(leading))
    container.backend.override(providers.Object(backend))
    container.events.override(providers.Singleton(EventsAtOnce, fake, container.leader_check))
    container.explanations.override(providers.Object(None))
    follower = container.follower()
    fake.subscribe(follower.handle)
    runtime = container.runtime()
    runtime.sync_now()
    return World(
        fake,
        container.state(),
        container.service(),
        runtime,
        clock,
        config,
        container.revoker(),
        leading,
        key_store,
        follower,
        container.book(),
        container.recorder(),
        container.late_grants(),
        container,
    )


class EventsAtOnce:
    """The EventQueue's rules without its thread: written at once by the leader only, the
    message cut to the API's limit, never raising (an Event is a courtesy)."""

    def __init__(self, cluster: FakeCluster, is_leader: Callable[[], bool]) -> None:
        self._cluster = cluster
        self._is_leader = is_leader

    def record(
        self, namespace: str, pod: str, reason: str, message: str, *, warning: bool = False
    ) -> None:
        if not self._is_leader():
            return
        if len(message) > MESSAGE_LIMIT:
            message = message[: MESSAGE_LIMIT - 3] + "..."
        with contextlib.suppress(Exception):
            self._cluster.record_event(namespace, pod, reason, message, warning=warning)


class _Leadership:
    def __init__(self, leading: list[bool]) -> None:
        self._leading = leading

    @property
    def is_leader(self) -> bool:
        return self._leading[0]

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def mig_node(name: str = "node1", cards: int = 1) -> ClusterNode:
    """A node whose A100-80GB cards are in MIG mode with their profiles (HAMi v2.10)."""
    devices = [mig_card(f"GPU-{name}-mig{i}", i) for i in range(cards)]
    return ClusterNode(name, {NVIDIA.register_annotation: encode_node_devices(devices)})


# one_card(): one node, node1, with one 10000 MiB card
CARD = "GPU-node1-0"
ALLOCATED = "hami.io/vgpu-devices-allocated"


def one_card() -> World:
    return world(gpu_node("node1", cards=1, memory=10000))


def placed_and_running(w: World, name: str, memory: int) -> None:
    """Through the scheduler's own filter and bind, then started by the kubelet."""
    assert w.filter(manifest(name, gpu=1, gpumem=memory), "node1").node_names == ["node1"]
    assert w.service.bind("default", name, f"uid-{name}", "node1") == ""
    w.cluster.release_node_lock("node1", "default", name)
    start(w, name)


def start(w: World, name: str) -> None:
    pod = w.cluster.get_pod("default", name)
    assert pod is not None
    w.cluster.put_pod(replace(pod, phase="Running"))


def hami_pod(name: str, memory: int, node: str = "node1", card: str = CARD) -> dict[str, Any]:
    """A pod HAMi's scheduler placed and the kubelet started: bound, unsigned."""
    body = manifest(
        name,
        node=node,
        phase="Running",
        annotations={
            "hami.io/vgpu-node": node,
            "hami.io/vgpu-time": "1750000000",
            ALLOCATED: f"{card},NVIDIA,{memory},0:;",
            "hami.io/bind-phase": "success",
        },
        gpu=1,
        gpumem=memory,
    )
    body["spec"]["schedulerName"] = "hami-scheduler"
    return body


def fits(w: World, name: str, memory: int) -> bool:
    return w.filter(manifest(name, gpu=1, gpumem=memory), "node1").node_names == ["node1"]
