"""A node in a few numbers: enough to rule it out for a pod, or bound its score, in O(1).

The ledger keeps one `NodeSummary` per node, recomputed from the node's cards on every change.
Everything here is a *necessary* condition or a *bound*: a node the summary rules out really
cannot take the pod, and no placement on a node scores above its bound. The exact answer is
always `fit_pod`'s.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass

from vgpu.domain.device import IDLE, Device, Usage
from vgpu.domain.fit import PodPlan
from vgpu.domain.policy import Policy, fullness_of
from vgpu.domain.request import ContainerRequest


@dataclass(frozen=True, slots=True)
class Capacity:
    """A node's totals and its smallest and largest card: nodes alike share one ordering."""

    slices: int
    cores: int
    memory: int
    smallest_card: int
    largest_card: int


@dataclass(frozen=True, slots=True)
class NodeSummary:
    capacity: Capacity
    fullness: float  # the node as it is, as `fit_pod` scores it
    used: tuple[int, int, int]  # slices, cores and memory in use on its cards
    open_cards: int  # healthy, not cordoned, a slice left
    unused_cards: int  # open and no slice taken (what exclusive and mutex pods need)
    most_free_memory: int  # on any open card
    most_free_cores: int  # on any open card
    open: tuple[tuple[int, int, bool, int], ...]  # per open card: free memory, free cores,
    # unused, card memory (for the few nodes the numbers above do not rule out)


def summarize(
    devices: tuple[Device, ...], usage: Mapping[str, Usage], cordoned: frozenset[str]
) -> NodeSummary:
    slices = cores = memory = used_slices = used_cores = used_memory = 0
    open_cards = unused_cards = most_free_memory = most_free_cores = 0
    free = []
    for device in devices:
        used = usage.get(device.uuid, IDLE)
        slices += device.count
        cores += device.cores
        memory += device.memory
        used_slices += used.slices
        used_cores += used.cores
        used_memory += used.memory
        if not device.healthy or device.uuid in cordoned or used.slices >= device.count:
            continue
        open_cards += 1
        unused_cards += used.slices == 0
        most_free_memory = max(most_free_memory, device.memory - used.memory)
        most_free_cores = max(most_free_cores, device.cores - used.cores)
        free.append(
            (
                device.memory - used.memory,
                device.cores - used.cores,
                used.slices == 0,
                device.memory,
            )
        )
    cards = [d.memory for d in devices] or [0]
    return NodeSummary(
        Capacity(slices, cores, memory, min(cards), max(cards)),
        fullness_of(used_slices, slices, used_cores, cores, used_memory, memory),
        (used_slices, used_cores, used_memory),
        open_cards,
        unused_cards,
        most_free_memory,
        most_free_cores,
        tuple(free),
    )


@dataclass(frozen=True, slots=True)
class PodNeeds:
    """What a pod asks of any node, read once per decision."""

    requests: tuple[ContainerRequest, ...]
    init_requests: tuple[ContainerRequest, ...]
    app_requests: tuple[ContainerRequest, ...]
    exclusive: bool  # mutex: only cards nobody uses
    in_mib: bool  # every request's memory is in MiB (none a percentage of a card)
    # may take MIG instances, which charge their profile's memory and cores, not the request's:
    # no summary rules such a pod out nor bounds its score (MIG pods are few; each is fitted)
    mig: bool = False

    @classmethod
    def of(cls, plan: PodPlan) -> "PodNeeds":
        init = tuple(r for r in plan.requests[: plan.init_count] if r is not None)
        app = tuple(r for r in plan.requests[plan.init_count :] if r is not None)
        requests = init + app
        in_mib = all(r.memory for r in requests)
        return cls(requests, init, app, plan.policies.idle_only, in_mib, plan.selector.takes_mig)

    def fixed_score(self, capacity: Capacity) -> bool:
        """True when the score of a placement on a node of this capacity depends only on what
        the node has in use, not on which cards the pod gets: its footprint totals are fixed
        (no init containers, whose claims overlap the app containers' per card; memory in
        MiB, or a percentage of cards that are all one size; no MIG instance, whose profile
        depends on the card)."""
        return (
            not self.mig
            and not self.init_requests
            and (self.in_mib or capacity.smallest_card == capacity.largest_card)
        )

    def may_fit(self, node: NodeSummary) -> bool:
        """False only when no choice of cards on the node can hold every container.

        Each container on its own, so a True may still be a node the pod does not fit.
        """
        if self.mig:
            return True
        for request in self.requests:
            unused_only = self.exclusive or request.cores >= 100
            cards = node.unused_cards if unused_only else node.open_cards
            memory = request.memory or node.capacity.smallest_card * request.memory_percent // 100
            if (
                request.count > cards
                or memory > node.most_free_memory
                or request.cores > node.most_free_cores
                or _roomy_cards(node, request, unused_only) < request.count
            ):
                return False
        return True

    def best_gain(self, policy: Policy, capacity: Capacity) -> float:
        """Most the pod can change a node's score: the highest fullness it can add (binpack),
        or minus the lowest (spread). Init containers' claims overlap the app containers'."""
        if self.mig:
            return math.inf
        if policy is Policy.BINPACK:
            slices, cores, memory = _total(self.requests, capacity.largest_card)
            return fullness_of(
                slices, capacity.slices, cores, capacity.cores, memory, capacity.memory
            )
        slices, cores, memory = _total(self.app_requests, capacity.smallest_card)
        for request in self.init_requests:
            alone = _total((request,), capacity.smallest_card)
            slices, cores, memory = (
                max(slices, alone[0]),
                max(cores, alone[1]),
                max(memory, alone[2]),
            )
        return -fullness_of(slices, capacity.slices, cores, capacity.cores, memory, capacity.memory)


def _roomy_cards(node: NodeSummary, request: ContainerRequest, unused_only: bool) -> int:
    """Open cards with room for one slice of `request`."""
    cores, memory, percent = request.cores, request.memory, request.memory_percent
    return sum(
        1
        for free_memory, free_cores, unused, card_memory in node.open
        if (unused or not unused_only)
        and free_cores >= cores
        and free_memory >= (memory or card_memory * percent // 100)
    )


def _total(requests: tuple[ContainerRequest, ...], card_memory: int) -> tuple[int, int, int]:
    slices = cores = memory = 0
    for request in requests:
        slices += request.count
        cores += request.count * request.cores
        memory += request.count * (request.memory or card_memory * request.memory_percent // 100)
    return slices, cores, memory
