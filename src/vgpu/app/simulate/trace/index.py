"""Which node takes the next pod of a replay, without asking every node about every pod.

Nodes change one at a time (the one that took the last pod), so for each pod shape and card
model the index keeps its last answer and brings it up to date with the nodes changed since:
a heap of (score, rank) for a scored policy, the set of nodes that fit for Random. The answer
is the one asking every node gives (a unit test compares them pod by pod).
"""

import heapq
from collections.abc import Iterable, Sequence

from vgpu.domain.fragmentation import MilliNode, MilliPod, RandomPlacement, Scored, fits, place

_Key = tuple[int, int, int, int, str]  # the pod's CPU, memory, cards, milli; the card model


class _Ranking:
    """Feasible nodes by (-score, rank, node, version); entries of changed nodes go stale."""

    __slots__ = ("heap", "seen")

    def __init__(self) -> None:
        self.heap: list[tuple[int, int, int, int]] = []
        self.seen = 0  # how much of the model's change log is reflected


class _Members:
    """The nodes that fit, in a list (to draw from) with each one's position."""

    __slots__ = ("nodes", "position", "seen")

    def __init__(self) -> None:
        self.nodes: list[int] = []
        self.position: dict[int, int] = {}
        self.seen = 0

    def add(self, node: int) -> None:
        if node not in self.position:
            self.position[node] = len(self.nodes)
            self.nodes.append(node)

    def remove(self, node: int) -> None:
        where = self.position.pop(node, None)
        if where is not None:
            last = self.nodes.pop()
            if last != node:
                self.nodes[where] = last
                self.position[last] = where


class NodeIndex:
    """The nodes of a replay under one policy: `choose` a node for a pod, `place` it there."""

    def __init__(
        self, nodes: Sequence[MilliNode], ranks: Sequence[int], policy: Scored | RandomPlacement
    ) -> None:
        self.nodes = list(nodes)
        self._ranks = ranks
        self._policy = policy
        self._versions = [0] * len(self.nodes)
        # per card model, its nodes in the order they changed; every node once to begin with
        self._changed: dict[str, list[int]] = {}
        for i, node in enumerate(self.nodes):
            self._changed.setdefault(node.model, []).append(i)
        self._rankings: dict[_Key, _Ranking] = {}
        self._members: dict[_Key, _Members] = {}

    def choose(self, pod: MilliPod) -> int | None:
        """The node that takes `pod`, or None when none fits."""
        models = sorted(pod.models) if pod.gpus and pod.models else list(self._changed)
        if isinstance(self._policy, RandomPlacement):
            return self._draw(pod, models, self._policy)
        best: tuple[int, int, int, int] | None = None
        for model in models:
            if model not in self._changed:
                continue
            top = self._top(pod, model, self._policy)
            if top is not None and (best is None or top < best):
                best = top
        return None if best is None else best[2]

    def place(self, node: int, pod: MilliPod) -> tuple[int, ...]:
        """Put `pod` on `node` (one `choose` gave) on the cards the policy picks; those cards."""
        before = self.nodes[node]
        cards = self._policy.cards(before, pod)
        self.nodes[node] = place(before, pod, cards)
        self._versions[node] += 1
        self._changed[before.model].append(node)
        return cards

    def _top(self, pod: MilliPod, model: str, policy: Scored) -> tuple[int, int, int, int] | None:
        key = (pod.cpu, pod.memory, pod.gpus, pod.milli, model)
        ranking = self._rankings.get(key)
        if ranking is None:
            ranking = self._rankings[key] = _Ranking()
        heap, nodes, versions = ranking.heap, self.nodes, self._versions
        for i in self._news(model, ranking):
            node = nodes[i]
            if fits(node, pod):
                heapq.heappush(heap, (-policy.score(node, pod), self._ranks[i], i, versions[i]))
        while heap and heap[0][3] != versions[heap[0][2]]:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def _draw(self, pod: MilliPod, models: Iterable[str], policy: RandomPlacement) -> int | None:
        groups = []
        for model in models:
            if model not in self._changed:
                continue
            key = (pod.cpu, pod.memory, pod.gpus, pod.milli, model)
            members = self._members.get(key)
            if members is None:
                members = self._members[key] = _Members()
            for i in self._news(model, members):
                if fits(self.nodes[i], pod):
                    members.add(i)
                else:
                    members.remove(i)
            groups.append(members.nodes)
        feasible = sum(len(group) for group in groups)
        if not feasible:
            return None
        pick = policy.node(feasible)
        for group in groups:
            if pick < len(group):
                return group[pick]
            pick -= len(group)
        raise AssertionError("the draw is below the count of feasible nodes")

    def _news(self, model: str, view: _Ranking | _Members) -> Iterable[int]:
        """The model's nodes changed since `view` last looked (each once), marked as seen."""
        log = self._changed[model]
        start, view.seen = view.seen, len(log)
        if start == len(log):
            return ()
        return dict.fromkeys(log[start:])
