"""`vgpu simulate --dra`: the same pods as ResourceClaims, allocated by kube-scheduler's
structured allocator (the domain's port of it) on slices of the simulated nodes' GPUs.

Each node publishes one slice with one shared device per GPU (`gpu_device`, the device the
kubelet plugin publishes); each pod's GPU request becomes a claim (`plan_claim`). With DRA
the stock kube-scheduler places pods: it tries the nodes in name order here and takes the first
one the allocator can serve (its own scores look at CPU and memory, not at GPUs), and the
allocator takes the first devices that fit. vgpu's node and card policies, the split count and
its namespace GPU quota play no part (DRA has no word for them).
"""

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from enum import StrEnum

from vgpu.domain import NVIDIA, NodeRejection, NodeScore, NoPlacement, Placement, PodPlan, Reason
from vgpu.domain.device import Device
from vgpu.domain.dra import (
    CORES,
    DEFAULT_DRIVER,
    MEMORY,
    AllocatedDevices,
    Allocation,
    Allocator,
    CannotAllocate,
    DeviceId,
    DeviceProblem,
    GpuCard,
    ResourceClaim,
    gpu_device,
    gpu_device_class,
    node_slice,
    plan_claim,
)
from vgpu.domain.errors import DomainError
from vgpu.domain.grant import DeviceGrant, PodGrants
from vgpu.domain.reasons import CardRejection

MIB = 2**20


class DraMode(StrEnum):
    """A run with claims and kube-scheduler's allocator instead of vgpu's scheduler."""

    KUBE_SCHEDULER = "dra"

    @property
    def label(self) -> str:
        return self.value


class DraPlacer:
    """Places pods as claims on the nodes' DRA devices, and keeps what they hold."""

    def __init__(self, devices: Mapping[str, Sequence[Device]], driver: str = DEFAULT_DRIVER):
        slices = []
        self._uuids: dict[DeviceId, str] = {}
        for node, cards in devices.items():
            published = [gpu_device(_card(d)) for d in cards if d.healthy]
            slices.append(node_slice(node, published, driver))
            for card, device in zip([d for d in cards if d.healthy], published, strict=True):
                self._uuids[DeviceId(driver, node, device.name)] = card.uuid
        kinds = {(d.type, d.memory): d for cards in devices.values() for d in cards}
        self._cards = list(kinds.values())  # one card of each product and size is enough
        self._driver = driver
        self._allocator = Allocator(slices, [gpu_device_class(driver)])
        self._allocated = AllocatedDevices()
        self._claims: dict[str, ResourceClaim] = {}
        self._shapes: dict[tuple[object, ...], ResourceClaim] = {}
        self._held: dict[str, ResourceClaim] = {}
        self._found: tuple[str, str, Allocation] | None = None  # the last `decide` that fit

    def decide(
        self, plan: PodPlan, nodes: Iterable[str], explain: bool = False
    ) -> Placement | NoPlacement:
        """The first of `nodes` the pod's claim can be allocated on, or NoPlacement (why, per
        device, only with `explain`)."""
        try:
            claim = self._claim(plan)
        except DomainError as exc:
            return NoPlacement({n: NodeRejection(n, Reason.MODE, str(exc)) for n in nodes})
        rejections: dict[str, NodeRejection] = {}
        for node in nodes:
            outcome = self._allocator.allocate([claim], node, self._allocated, explain)
            if isinstance(outcome, Allocation):
                self._found = (plan.key, node, outcome)
                grants = self._grants(plan, claim, outcome)
                return Placement(node, grants, (NodeScore(node, 0.0),), rejections)
            rejections[node] = self._rejection(node, outcome)
        return NoPlacement(rejections)

    def placed(self, pod: str, node: str) -> None:
        """The pod went to `node` with what `decide` found there: its claim now holds it."""
        found = self._found
        if found is None or found[:2] != (pod, node):
            raise ValueError(f"pod {pod} was not just found a place on {node}")
        held = replace(self._claims[pod], allocation=found[2].results[0])
        self._held[pod] = held
        self._allocated.add(held)
        self._found = None

    def released(self, pod: str) -> None:
        """The pod ended or was evicted: its claim is deallocated."""
        held = self._held.pop(pod, None)
        if held is not None:
            self._allocated.remove(held.key)

    def _claim(self, plan: PodPlan) -> ResourceClaim:
        """The pod's claim (pods that ask alike share one, renamed)."""
        shape = (plan.containers, plan.requests, plan.selector)
        claim = self._shapes.get(shape)
        if claim is None:
            claim = self._shapes[shape] = plan_claim(plan, self._cards, self._driver)
        namespace, _, pod = plan.key.partition("/")
        claim = replace(claim, name=f"{pod}-gpu", namespace=namespace, uid=plan.key)
        self._claims[plan.key] = claim
        return claim

    def _grants(self, plan: PodPlan, claim: ResourceClaim, outcome: Allocation) -> PodGrants:
        by_request: dict[str, list[DeviceGrant]] = {r.name: [] for r in claim.requests}
        for result in outcome.results[0].results:
            consumed = {k.rpartition("/")[2]: v for k, v in result.consumed_capacity.items()}
            grant = DeviceGrant(
                self._uuids[DeviceId.of(result)],
                NVIDIA.word,
                consumed.get(MEMORY, 0) // MIB,
                consumed.get(CORES, 0),
            )
            by_request[result.request.partition("/")[0]].append(grant)
        names = iter(r.name for r in claim.requests)
        return tuple(
            () if request is None else tuple(by_request[next(names)]) for request in plan.requests
        )

    def _rejection(self, node: str, outcome: CannotAllocate) -> NodeRejection:
        if outcome.problem:
            return NodeRejection(node, Reason.POLICY, outcome.problem)
        if not outcome.verdicts:
            if not self._allocator.candidates(node):
                return NodeRejection(node, Reason.NODE_UNREGISTERED, f"{node} publishes no devices")
            return NodeRejection(node, Reason.NOT_ENOUGH_CARDS, outcome.message)
        cards = tuple(
            CardRejection(self._uuids.get(v.device, str(v.device)), _reason(v.problem, v.capacity))
            for v in outcome.verdicts
            if v.problem is not None
        )
        counts = Counter(c.reason for c in cards)
        reason = max(sorted(counts), key=counts.__getitem__) if counts else Reason.NOT_ENOUGH_CARDS
        return NodeRejection(node, reason, outcome.message, cards, len(outcome.verdicts))


def _card(device: Device) -> GpuCard:
    return GpuCard(device.uuid, device.index, device.type, device.memory, device.cores, device.numa)


def _reason(problem: DeviceProblem | None, capacity: str) -> Reason:
    """The device plugin's reason token closest to a DRA device problem."""
    if problem in (DeviceProblem.INSUFFICIENT, DeviceProblem.POLICY):
        return Reason.INSUFFICIENT_CORES if capacity.endswith(CORES) else Reason.INSUFFICIENT_MEMORY
    if problem is DeviceProblem.IN_USE:
        return Reason.EXCLUSIVE
    return Reason.TYPE_MISMATCH
