"""Nodes sorted by fullness, one sorted list per node capacity, kept current in O(log n).

Walking it yields *alike* nodes together, with an upper bound on the score a pod could get on
any of them, best bound first, so a search can stop at the first bound below the best score
found. Alike nodes have the same capacity and the same slices, cores and memory in use (so the
same fullness); a block lists them by name, under either policy, so the first of equally good
nodes a search meets is the one a tie goes to.
"""

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator
from itertools import groupby
from operator import itemgetter

from vgpu.domain.ledger.node_summary import Capacity
from vgpu.domain.policy import Policy, preference

Used = tuple[int, int, int]  # slices, cores, memory in use on the node's cards
Block = tuple[float, Iterable[str]]  # (upper bound of the score, alike nodes by name)
Gain = Callable[[Capacity], float]
_Entry = tuple[float, Used, str]  # (fullness, or minus it, used, node)
_alike = itemgetter(0, 1)
_name = itemgetter(2)


class FullnessOrder:
    def __init__(self) -> None:
        # per capacity: entries by fullness (spread's order), and by minus fullness (binpack's)
        self._sorted: dict[Capacity, tuple[list[_Entry], list[_Entry]]] = {}
        self._place: dict[str, tuple[Capacity, float, Used]] = {}

    def __len__(self) -> int:
        return len(self._place)

    def put(self, node: str, capacity: Capacity, fullness: float, used: Used) -> None:
        if self._place.get(node) == (capacity, fullness, used):
            return
        self.remove(node)
        emptiest_first, fullest_first = self._sorted.setdefault(capacity, ([], []))
        insort(emptiest_first, (fullness, used, node))
        insort(fullest_first, (-fullness, used, node))
        self._place[node] = (capacity, fullness, used)

    def remove(self, node: str) -> None:
        place = self._place.pop(node, None)
        if place is None:
            return
        capacity, fullness, used = place
        emptiest_first, fullest_first = self._sorted[capacity]
        del emptiest_first[bisect_left(emptiest_first, (fullness, used, node))]
        del fullest_first[bisect_left(fullest_first, (-fullness, used, node))]
        if not emptiest_first:
            del self._sorted[capacity]

    def walk(self, policy: Policy, gain: Gain) -> Iterator[Block]:
        """Every node, highest bound first: `preference(policy, fullness) + gain(capacity)`."""
        runs = [self._run(policy, capacity, gain(capacity)) for capacity in self._sorted]
        if len(runs) == 1:
            return runs[0]
        return heapq.merge(*runs, key=lambda block: -block[0])

    def rank(self, nodes: Iterable[str], policy: Policy, gain: Gain) -> list[Block]:
        """Only `nodes` (those in the order), highest bound first, one per block: for a few
        candidates."""
        gains: dict[Capacity, float] = {}
        ranked = []
        for node in nodes:
            place = self._place.get(node)
            if place is not None:
                capacity, fullness, _ = place
                if capacity not in gains:
                    gains[capacity] = gain(capacity)
                ranked.append((preference(policy, fullness) + gains[capacity], node))
        ranked.sort(key=lambda bounded: (-bounded[0], bounded[1]))
        return [(bound, (node,)) for bound, node in ranked]

    def _run(self, policy: Policy, capacity: Capacity, gain: float) -> Iterator[Block]:
        """The capacity's blocks of alike nodes, best first under `policy`."""
        binpack = policy is Policy.BINPACK
        for (fullness, _), alike in groupby(self._sorted[capacity][binpack], _alike):
            yield preference(policy, -fullness if binpack else fullness) + gain, map(_name, alike)
