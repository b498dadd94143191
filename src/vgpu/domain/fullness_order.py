"""Nodes sorted by fullness, one sorted list per node capacity, kept current in O(log n).

Walking it yields nodes with an upper bound on the score a pod could get there, best bound
first, so a search can stop at the first node whose bound is below the best score found.
"""

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator

from vgpu.domain.node_summary import Capacity
from vgpu.domain.policy import Policy, preference

Bounded = tuple[float, str]  # (upper bound of the score, node)
Gain = Callable[[Capacity], float]


class FullnessOrder:
    def __init__(self) -> None:
        self._sorted: dict[Capacity, list[tuple[float, str]]] = {}
        self._place: dict[str, tuple[Capacity, float]] = {}

    def __len__(self) -> int:
        return len(self._place)

    def put(self, node: str, capacity: Capacity, fullness: float) -> None:
        if self._place.get(node) == (capacity, fullness):
            return
        self.remove(node)
        insort(self._sorted.setdefault(capacity, []), (fullness, node))
        self._place[node] = (capacity, fullness)

    def remove(self, node: str) -> None:
        place = self._place.pop(node, None)
        if place is None:
            return
        capacity, fullness = place
        entries = self._sorted[capacity]
        del entries[bisect_left(entries, (fullness, node))]
        if not entries:
            del self._sorted[capacity]

    def walk(self, policy: Policy, gain: Gain) -> Iterator[Bounded]:
        """Every node, highest bound first: `preference(policy, fullness) + gain(capacity)`."""
        runs = [self._run(policy, capacity, gain(capacity)) for capacity in self._sorted]
        if len(runs) == 1:
            return runs[0]
        return heapq.merge(*runs, key=lambda bounded: -bounded[0])

    def rank(self, nodes: Iterable[str], policy: Policy, gain: Gain) -> list[Bounded]:
        """Only `nodes` (those in the order), highest bound first: for a few candidates."""
        gains: dict[Capacity, float] = {}
        ranked = []
        for node in nodes:
            place = self._place.get(node)
            if place is not None:
                capacity, fullness = place
                if capacity not in gains:
                    gains[capacity] = gain(capacity)
                ranked.append((preference(policy, fullness) + gains[capacity], node))
        ranked.sort(key=lambda bounded: -bounded[0])
        return ranked

    def _run(self, policy: Policy, capacity: Capacity, gain: float) -> Iterator[Bounded]:
        entries = self._sorted[capacity]
        ordered = reversed(entries) if policy is Policy.BINPACK else iter(entries)
        for fullness, node in ordered:
            yield preference(policy, fullness) + gain, node
