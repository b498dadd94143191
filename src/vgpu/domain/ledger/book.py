"""Usage per node and card, kept incrementally from grants and releases, and each node's CPU
and host memory left (`host_book.py`).

The scheduler owns one Ledger, feeds it node and pod events, and asks it for decisions
(`Ledger.decide`, indexed) or for `NodeView`s to hand to `decide`.
"""

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import reduce
from operator import or_

from vgpu.domain.decision import Decision
from vgpu.domain.device import IDLE, MIG_MODE, Device, Usage
from vgpu.domain.errors import LedgerError, brief
from vgpu.domain.fit import NO_SCORES, NodeView, PodPlan
from vgpu.domain.fragmentation.card_balanced import CardCounts, card_kind
from vgpu.domain.grant import PodGrants, overlapping_instances, pod_footprint
from vgpu.domain.host import HostResources
from vgpu.domain.initrelease import hold_after_init
from vgpu.domain.ledger.host_book import HostBook
from vgpu.domain.ledger.index import LedgerIndex
from vgpu.domain.mig.allocations import MIG_ALLOCATIONS_ANNOTATION, decode_mig_allocations
from vgpu.domain.mig.grants import decode_granted
from vgpu.domain.pod import Pod
from vgpu.domain.quota import UNLIMITED, Budget
from vgpu.domain.topology import PairScores
from vgpu.domain.vendor import ASSIGNED_NODE_ANNOTATION, Vendor


@dataclass(frozen=True, slots=True)
class PodAllocation:
    """A pod's grants on a node, and what it holds on each card at its peak."""

    pod: str
    node: str
    grants: PodGrants
    footprint: dict[str, Usage]


class Ledger:
    """Nodes' cards and usage. Every change is all-or-nothing; releasing twice is harmless."""

    def __init__(self) -> None:
        self._devices: dict[str, tuple[Device, ...]] = {}
        self._cordoned: dict[str, frozenset[str]] = {}
        self._pair_scores: dict[str, PairScores] = {}
        self._usage: dict[str, dict[str, Usage]] = {}
        self._pods: dict[str, PodAllocation] = {}
        self._host = HostBook()
        self._index = LedgerIndex()
        self._card_counts: CardCounts | None = None  # worked out on first need after a change

    # nodes -----------------------------------------------------------------------------------
    def set_node(
        self,
        node: str,
        devices: Iterable[Device],
        cordoned: frozenset[str] = frozenset(),
        pair_scores: PairScores | None = None,
    ) -> None:
        """Replace a node's card list (a card may vanish or turn unhealthy) and its published
        pair scores (`topology-aware`); usage is kept. The same cards again (a node event about
        anything else, such as its lock or its status) change nothing, so the index keeps what
        it remembers about the node."""
        cards = tuple(devices)
        scores = NO_SCORES if pair_scores is None else pair_scores
        if (
            self._devices.get(node) == cards
            and self._cordoned.get(node) == cordoned
            and self._pair_scores.get(node) == scores
        ):
            return
        if self._devices.get(node) != cards:
            self._card_counts = None
        self._devices[node] = cards
        self._cordoned[node] = cordoned
        self._pair_scores[node] = scores
        self._usage.setdefault(node, {})
        self._refresh(node)

    def remove_node(self, node: str) -> None:
        """Forget a node's cards; its pods' usage stays until they are released."""
        if node in self._devices:
            self._card_counts = None
        self._devices.pop(node, None)
        self._cordoned.pop(node, None)
        self._pair_scores.pop(node, None)
        self._index.drop(node)

    def set_host(self, node: str, allocatable: HostResources | None) -> None:
        """The node's allocatable CPU and host memory (None: unknown, and FGD counts its CPU
        as enough for every pod shape)."""
        if self._host.set_capacity(node, allocatable):
            self._refresh(node)

    def charge_host(
        self, pod: str, node: str, request: HostResources, *, bound: bool = False
    ) -> None:
        """Count the pod's CPU and memory request on `node`: a bound pod's (any pod, GPU or
        not), or a reservation's (`bound` False) until it is bound or released."""
        for changed in self._host.charge(pod, node, request, bound):
            self._refresh(changed)

    def release_host(self, pod: str, *, unbound_only: bool = False) -> None:
        """Stop counting the pod's CPU and memory (with `unbound_only`, a reservation's only)."""
        for changed in self._host.release(pod, unbound_only=unbound_only):
            self._refresh(changed)

    def settle(self) -> None:
        """Do now what the index otherwise does on first need (tell which nodes are alike, so
        that a pod that fits nowhere is cheap): once a rebuild is done."""
        self._index.settle(self.view)

    def card_counts(self) -> CardCounts:
        """How many cards of each kind (type, memory, cores) the nodes have, sorted: the
        cluster FGD-balanced weighs card types' claims against. The same tuple until a node's
        cards change."""
        counts = self._card_counts
        if counts is None:
            kinds = Counter(card_kind(d) for devices in self._devices.values() for d in devices)
            counts = self._card_counts = tuple(sorted(kinds.items()))
        return counts

    def nodes(self) -> list[str]:
        """The names of the nodes with cards set (`set_node`), sorted."""
        return sorted(self._devices)

    def view(self, node: str, exclude_pod: str | None = None) -> NodeView:
        """The node as `decide` needs it; an unknown node has no cards.

        The usage is the ledger's own mapping, not a copy: read it before the ledger changes.
        `exclude_pod` leaves that pod's grant out (a copy then, for this node only).
        """
        usage = self._usage.get(node, {})
        own = self._pods.get(exclude_pod) if exclude_pod is not None else None
        if own is not None and own.node == node:
            usage = dict(usage)
            self._take_off(node, usage, own)
        return NodeView(
            node,
            self._devices.get(node, ()),
            usage,
            self._cordoned.get(node, frozenset()),
            self._pair_scores.get(node, NO_SCORES),
            self._host.free(node, exclude_pod),
        )

    def decide(
        self, plan: PodPlan, nodes: Iterable[str] | None = None, budget: Budget = UNLIMITED
    ) -> Decision:
        """`decide` over these nodes (default: every node), through the index: the same node,
        cards and score, but `scores` holds only the chosen node and `rejections` is empty
        unless the pod fits nowhere. Use `decide` with views for every feasible node."""
        return self._index.decide(plan, self.nodes() if nodes is None else nodes, self.view, budget)

    def feasible(
        self,
        plan: PodPlan,
        nodes: Iterable[str],
        budget: Budget = UNLIMITED,
        exclude_pod: str | None = None,
    ) -> Decision:
        """Exactly `decide` over `[view(n, exclude_pod) for n in nodes]` (every feasible node's
        score and every other node's rejection), answered from the index's remembered fits
        where a node is unchanged: combined-scores mode asks this for every pod."""
        fresh = None
        if exclude_pod is not None:  # its reservation's cards and CPU are on one node
            own = self._pods.get(exclude_pod) or self._host.charged(exclude_pod)
            fresh = None if own is None else own.node
        return self._index.feasible(
            plan, nodes, lambda node: self.view(node, exclude_pod), budget, fresh=fresh
        )

    def usage(self, node: str, uuid: str) -> Usage:
        """What the pods hold of one card (idle for an unknown node or card)."""
        return self._usage.get(node, {}).get(uuid, IDLE)

    # pods ------------------------------------------------------------------------------------
    def grant(
        self,
        pod: str,
        node: str,
        grants: PodGrants,
        init_count: int = 0,
        *,
        strict: bool = True,
        footprint: Mapping[str, Usage] | None = None,
    ) -> list[str]:
        """Record a pod's grants; returns problems worth logging (unknown node or card).

        With `strict`, a grant that would take a card past its capacity raises LedgerError and
        changes nothing. Granting the same pod again replaces its earlier grant. `footprint`
        overrides what the pod holds per card (`pod_footprint` by default), e.g. the smaller
        hold once its init containers have finished (`vgpu.domain.initrelease.pod_hold`).
        """
        footprint = dict(footprint) if footprint is not None else pod_footprint(grants, init_count)
        unplaced = self._pin_unplaced(pod, node, footprint)
        overlap = overlapping_instances(grants)  # the footprint joins them: check before
        if overlap is not None:
            unplaced.append(f"pod {pod}: {overlap} of the pod")
        if unplaced and strict:
            raise LedgerError(unplaced[0])
        previous = self._pods.get(pod)
        if (
            previous is not None
            and previous.node == node
            and previous.grants == grants
            and previous.footprint == footprint
        ):
            return []
        node_usage = dict(self._usage.get(node, {}))
        if previous is not None and previous.node == node:
            self._take_off(node, node_usage, previous)
        problems = unplaced + self._check(pod, node, footprint, node_usage, strict)
        if previous is not None:
            self.release(pod)
        usage = self._usage.setdefault(node, {})
        for uuid, amount in footprint.items():
            usage[uuid] = usage.get(uuid, IDLE) + amount
        self._pods[pod] = PodAllocation(pod, node, grants, footprint)
        self._refresh(node)
        return problems

    def release(self, pod: str) -> bool:
        """Give back a pod's grants; False (and no change) when the pod holds none."""
        allocation = self._pods.get(pod)
        if allocation is None:
            return False
        self._take_off(allocation.node, self._usage.setdefault(allocation.node, {}), allocation)
        del self._pods[pod]
        self._refresh(allocation.node)
        return True

    def allocation(self, pod: str) -> PodAllocation | None:
        """The pod's grants, node and hold (`namespace/name`), or None when it holds none."""
        return self._pods.get(pod)

    def misfit(self, pod: str) -> str | None:
        """Why the pod's hold no longer fits its node beside every other pod's (a card past its
        capacity, shared MIG slices), or None when it fits or the pod holds nothing."""
        allocation = self._pods.get(pod)
        if allocation is None:
            return None
        return self._overfill(pod, allocation.node, allocation.footprint)

    def overfill(
        self,
        pod: str,
        node: str,
        grants: PodGrants,
        init_count: int = 0,
        footprint: Mapping[str, Usage] | None = None,
    ) -> str | None:
        """Why granting this would take a card of `node` past its capacity beside every other
        pod's hold (the pod's own earlier grant left out), or None; changes nothing."""
        held = dict(footprint) if footprint is not None else pod_footprint(grants, init_count)
        self._pin_unplaced(pod, node, held)
        return self._overfill(pod, node, held)

    def _overfill(self, pod: str, node: str, footprint: dict[str, Usage]) -> str | None:
        others = dict(self._usage.get(node, {}))
        previous = self._pods.get(pod)
        if previous is not None and previous.node == node:
            self._take_off(node, others, previous)
        try:
            self._check(pod, node, footprint, others, strict=True)
        except LedgerError as exc:
            return str(exc)
        return None

    def pods(self) -> list[PodAllocation]:
        """Every pod that holds grants, with its node, grants and hold per card."""
        return list(self._pods.values())

    def record_pod(self, pod: Pod, vendor: Vendor) -> list[str]:
        """Follow a pod as the cluster reports it (used for rebuilds after a restart).

        A finished pod releases its grant; a pod assigned to a node with a grant annotation
        holds it, with the MIG instances its `hami.io/vgpu-mig-allocations` reserves. A
        malformed annotation, or MIG reservations that disagree with the device list, raise
        CodecError and leave the ledger unchanged.
        """
        if pod.is_finished:
            self.release(pod.key)
            return []
        node = pod.annotations.get(ASSIGNED_NODE_ANNOTATION, "") or pod.node_name
        text = pod.annotations.get(vendor.allocated_annotation)
        if not node or text is None:
            return []
        reservations = decode_mig_allocations(pod.annotations.get(MIG_ALLOCATIONS_ANNOTATION, ""))
        grants = decode_granted(text, reservations, vendor.allocated_annotation)
        after_init = hold_after_init(grants, pod.init_progress)
        return self.grant(pod.key, node, grants, pod.init_count, strict=False, footprint=after_init)

    def _refresh(self, node: str) -> None:
        devices = self._devices.get(node)
        if devices is not None:
            self._index.update(node, devices, self._usage[node], self._cordoned[node])

    def _check(
        self,
        pod: str,
        node: str,
        footprint: dict[str, Usage],
        node_usage: dict[str, Usage],
        strict: bool,
    ) -> list[str]:
        devices = self._devices.get(node)
        if devices is None:
            return [f"pod {pod}: node {node} has no registered GPUs; its grant is kept"]
        by_uuid = {d.uuid: d for d in devices}
        problems = []
        missing = [uuid for uuid in footprint if uuid not in by_uuid]
        if missing:  # ids from a pod's annotations: cut short, in one line however many
            problems.append(f"pod {pod}: {_cards_not_on(missing, node)}; its grant is kept")
        for uuid, amount in footprint.items():
            device = by_uuid.get(uuid)
            if device is None:
                continue
            message = _misfit(node_usage.get(uuid, IDLE), amount, device)
            if message is not None:
                message = f"pod {pod}: card {uuid} on {node} {message}"
                if strict:
                    raise LedgerError(message)
                problems.append(message)
        return problems

    def _pin_unplaced(self, pod: str, node: str, footprint: dict[str, Usage]) -> list[str]:
        """A slice of a card in MIG mode without a MIG instance (a grant from a scheduler that
        writes no reservations, or a card switched to MIG since): where its instance sits is
        unknown, so it is counted on every slice of the card, as HAMi stops using the card."""
        problems = []
        for device in self._devices.get(node, ()):
            amount = footprint.get(device.uuid)
            if amount is None or amount.mig or device.mode != MIG_MODE:
                continue
            whole = _every_slice(device)
            footprint[device.uuid] = Usage(amount.slices, amount.memory, amount.cores, whole)
            problems.append(
                f"pod {pod}: card {device.uuid} on {node} is in MIG mode but the pod's grant "
                "names no MIG instance there; the whole card counts as taken while it runs"
            )
        return problems

    def _take_off(self, node: str, usage: dict[str, Usage], allocation: PodAllocation) -> None:
        """Subtract a pod's hold from `usage`, keeping MIG slices that another pod's grant (a
        signed one recorded past an overlap, say) still claims: never count too little."""
        _subtract(usage, allocation.footprint)
        for uuid, amount in allocation.footprint.items():
            if not amount.mig:
                continue
            still = amount.mig & self._mig_claimed(node, uuid, allocation.pod)
            if still:
                left = usage.get(uuid, IDLE)
                usage[uuid] = Usage(left.slices, left.memory, left.cores, left.mig | still)

    def _mig_claimed(self, node: str, uuid: str, besides: str) -> int:
        """The MIG slices of card `uuid` that the pods on `node` other than `besides` hold
        (a scan of every pod: only a MIG release pays for it)."""
        claimed = 0
        for allocation in self._pods.values():
            if allocation.node == node and allocation.pod != besides:
                held = allocation.footprint.get(uuid)
                if held is not None:
                    claimed |= held.mig
        return claimed


def _every_slice(device: Device) -> int:
    return reduce(
        or_,
        (p.mask for profile in device.mig_profiles for p in profile.placements if p.fits_mask),
        0,
    )


def _misfit(held: Usage, amount: Usage, device: Device) -> str | None:
    """Why `amount` cannot join `held` on `device`, or None."""
    if held.collides(amount):
        return f"would share MIG slices {bin(held.mig & amount.mig)} with another instance"
    if amount.mig and device.mode != MIG_MODE:
        return f"is in mode {device.mode or '(none)'!r}, not mig, but would get a MIG instance"
    after = held + amount
    if after.fits_in(device):
        return None
    return (
        f"would be over capacity ({after.slices}/{device.count} slices, "
        f"{after.memory}/{device.memory} MiB, {after.cores}/{device.cores} cores)"
    )


def _subtract(usage: dict[str, Usage], footprint: dict[str, Usage]) -> None:
    for uuid, amount in footprint.items():
        left = usage.get(uuid, IDLE) - amount
        if left.is_idle:
            usage.pop(uuid, None)
        else:
            usage[uuid] = left


_NAMED_CARDS = 3


def _cards_not_on(uuids: list[str], node: str) -> str:
    """`card 'x' is not on node n`, or `cards 'x', 'y', 'z' and 5 more are not on node n`."""
    if len(uuids) == 1:
        return f"card {brief(uuids[0])} is not on node {node}"
    named = ", ".join(brief(uuid) for uuid in uuids[:_NAMED_CARDS])
    more = f" and {len(uuids) - _NAMED_CARDS} more" if len(uuids) > _NAMED_CARDS else ""
    return f"cards {named}{more} are not on node {node}"
