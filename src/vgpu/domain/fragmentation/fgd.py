"""Fragmentation Gradient Descent (Weng et al., "Beware of Fragmentation", USENIX ATC'23).

A node's fragmentation F_n is the free GPU it would strand for the workload's typical pods:
for each typical shape, the free milli of the cards too small for it when the node can take
the shape at all, else all the node's free milli, weighted by how common the shape is. FGD
places a pod where that grows least: a node's score is `floor(100 sigma((F_n - F_n') / 1000))`
(F_n' once the pod is placed, sigma the logistic function), 0..99 with 50 for no change; a
share of one card goes on the card that scores best, the lowest index among equals, and whole
cards on the lowest-index free ones.
"""

import math
from collections.abc import Callable, Sequence

from vgpu.domain.fragmentation.milli import MILLI, MilliNode, MilliPod, fitting_cards, whole_cards
from vgpu.domain.fragmentation.workload import MilliWorkload, ShapeTable

_SCORES_KEPT = 1 << 17  # remembered (node state, pod shape) scores; a long-lived scheduler's bound

_ScoreKey = tuple[ShapeTable, int, int, tuple[int, ...], int, int]


class Fgd:
    """FGD against one workload's typical shapes.

    >>> from vgpu.domain.fragmentation.workload import TypicalShape
    >>> fgd = Fgd(MilliWorkload([TypicalShape(count=1, gpus=1, milli=500)]))
    >>> node = MilliNode("T4", cpu=8000, memory=32768, free=(1000, 700))
    >>> fgd.fragmentation(node)  # the 700 card still takes a 500 share: nothing stranded
    0.0
    >>> pod = MilliPod(cpu=1000, gpus=1, milli=300)
    >>> fgd.cards(node, pod)  # on card 1, 400 would be left: a 500 share no longer fits
    (0,)
    >>> fgd.score(node, pod)  # card 0 keeps 700 free: no fragmentation added, sigma(0) = 0.5
    50
    """

    def __init__(self, workload: MilliWorkload) -> None:
        self.workload = workload
        self._scores: dict[_ScoreKey, int] = {}

    def fragmentation(self, node: MilliNode) -> float:
        """F_n in milli."""
        table = self.workload.table(node.model)
        if not table.total:
            return 0.0
        free = tuple(sorted(node.free, reverse=True))
        return table.fragmentation(table.level(node.cpu), free) / table.total

    def score(self, node: MilliNode, pod: MilliPod) -> int:
        """The node's score for `pod` (which must fit it), 0..99."""
        table = self.workload.table(node.model)
        free = tuple(sorted(node.free, reverse=True))
        before, after = table.level(node.cpu), table.level(node.cpu - pod.cpu)
        key = (table, before, after, free, pod.gpus, pod.milli)
        known = self._scores.get(key)
        if known is None:
            known = gain_score(_best_gain(table, before, after, free, pod), table.total)
            if len(self._scores) >= _SCORES_KEPT:
                self._scores.clear()
            self._scores[key] = known
        return known

    def cards(self, node: MilliNode, pod: MilliPod) -> tuple[int, ...]:
        """The cards FGD gives `pod` on `node` (which it must fit)."""
        table = self.workload.table(node.model)
        level, after = table.level(node.cpu), table.level(node.cpu - pod.cpu)
        return best_cards(
            node, pod, lambda left: score_change(table, level, node.free, after, left)
        )


def best_cards(
    node: MilliNode, pod: MilliPod, score: Callable[[Sequence[int]], int]
) -> tuple[int, ...]:
    """The cards `pod` takes on `node` (which it must fit) under a policy that scores the
    node's cards once the pod is placed (`score` of their free milli, in card order): none for a
    CPU-only pod, the lowest-index free cards for whole cards, and for a share the card that
    scores best, the lowest index among equals."""
    if not pod.gpus:
        return ()
    if pod.milli >= MILLI:
        return whole_cards(node, pod.gpus)
    best, chosen = -1, -1
    for card in fitting_cards(node, pod.milli):
        left = list(node.free)
        left[card] -= pod.milli
        scored = score(left)
        if scored > best:
            best, chosen = scored, card
    return (chosen,)


def score_change(
    table: ShapeTable,
    level: int,
    free: Sequence[int],
    level_after: int,
    free_after: Sequence[int],
) -> int:
    """FGD's score for a node going from (`level`, `free`) to (`level_after`, `free_after`):
    its CPU level (`ShapeTable.level`) and its cards' free milli, in any order."""
    before = table.fragmentation(level, tuple(sorted(free, reverse=True)))
    after = table.fragmentation(level_after, tuple(sorted(free_after, reverse=True)))
    return gain_score(before - after, table.total)


def _best_gain(
    table: ShapeTable, before: int, after: int, free: tuple[int, ...], pod: MilliPod
) -> int:
    """The largest drop in `total` x F_n the pod can make on a node whose cards have `free`
    (sorted largest first), over the cards it may take."""
    start = table.fragmentation(before, free)
    if not pod.gpus:
        return start - table.fragmentation(after, free)
    if pod.milli >= MILLI:
        left = [0] * pod.gpus + list(free[pod.gpus :])  # the whole cards lead a sorted `free`
        return start - table.fragmentation(after, tuple(sorted(left, reverse=True)))
    best: int | None = None
    for i, room in enumerate(free):
        if room < pod.milli:
            break
        if i and room == free[i - 1]:
            continue  # an equal card leaves the same node behind
        left = list(free)
        left[i] = room - pod.milli
        gain = start - table.fragmentation(after, tuple(sorted(left, reverse=True)))
        if best is None or gain > best:
            best = gain
    assert best is not None, "the pod must fit the node"
    return best


def gain_score(gain: int, total: int) -> int:
    """floor(100 sigma(gain / total / 1000)): `gain` is a drop in total x F_n."""
    x = gain / total / MILLI if total else 0.0
    return math.floor(100 / (1 + math.exp(-x)))
