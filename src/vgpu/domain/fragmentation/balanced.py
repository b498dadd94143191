"""FGD-balanced: FGD's fragmentation measured on the whole node, and card models priced by what
pods pinned to them need.

FGD (`fgd.py`) counts a typical shape as able to use every card with room for it as soon as one
pod of the shape fits the node's CPU and host memory. Two things it leaves out cost GPU on
Alibaba's trace (docs/simulate.md, "Beyond the paper"):

- **The node's CPU and host memory.** A node with eight free cards and CPU for two more pods of
  a shape strands six cards for that shape. Here each shape reaches only the cards (largest free
  first) that the node's free CPU and memory can serve: `k = min(C / cpu, M / memory)` more pods
  of `g` cards reach `k g` cards, the last one in part (`k` need not be whole, so that each core
  a pod takes counts). The cards it cannot reach are stranded for it like the cards too small.
  CPU-only shapes use no card, so they strand none (FGD counts every free card stranded for
  them, which adds the same to every GPU pod's gain); they show in the CPU and memory they leave
  the GPU shapes. The weights stay FGD's: each shape's share of the typical pods.
- **Which card models pinned pods need.** A pod that may use any card but lands on a model that
  pinned pods need leaves them nowhere to go, while cards of other models stay free. Each model
  has a *claim*: for each typical shape pinned to a set of models that holds it, the shape's
  share of the typical GPU demand divided by that set's share of the cluster's cards, summed
  (1.0: once the cluster's worth of GPU has been asked for, the pods pinned to the model alone
  would fill its cards). Taking `r` milli of a model's cards costs `claim x r` milli of
  fragmentation.
- **What a card is left with once typical pods stop fitting it.** FGD looks one pod ahead: a
  card with 1000 free is fit for an 810 pod, but the 190 that pod leaves fits almost nothing.
  Each card also counts the milli it is expected to end with unused if typical pods keep
  landing on it, each drawn by its count among those that still fit, until none does
  (`expected_waste`), weighted by the count of the GPU shapes that may use its model, as a
  shape's stranded milli is by its count.

A node's score for a pod is `floor(100 sigma((F_n - F_n' - claim x r) / 1000))` (F_n' once the
pod is placed), an integer as FGD's, so that equally good nodes tie and the lowest rank takes
them; a share goes on the card that scores best (the lowest index among equals), whole cards
on the lowest-index free ones.
"""

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from vgpu.domain.fragmentation.fgd import best_cards
from vgpu.domain.fragmentation.milli import MILLI, MilliNode, MilliPod
from vgpu.domain.fragmentation.workload import MEMO_LIMIT, MilliWorkload, TypicalShape

# (count, milli, cards, CPU, memory): a GPU shape as one model's nodes see it
_Need = tuple[int, int, int, int, int]
_ScoreKey = tuple[str, int, int, tuple[int, ...], int, int, int, int]
M = TypeVar("M", bound=Hashable)
_PERCENT = 100  # a card's free share, for its expected waste, in whole percents


def claims(shapes: Sequence[TypicalShape], cards: Mapping[str, int]) -> dict[str, float]:
    """Each card model's claim by pinned pods (0 for a model no typical shape is pinned to),
    for a cluster with `cards` cards of each model.

    >>> shapes = [TypicalShape(3, 1, 1000), TypicalShape(1, 1, 1000, models=frozenset({"T4"}))]
    >>> claims(shapes, {"T4": 2, "G2": 8})  # T4 is 20 % of the cards, its pods 25 % of the GPU
    {'T4': 1.25, 'G2': 0.0}
    """
    return model_claims(((s.count * s.gpus * s.milli, s.models or None) for s in shapes), cards)


def model_claims(
    demands: Iterable[tuple[int | Fraction, Collection[M] | None]], cards: Mapping[M, int]
) -> dict[M, float]:
    """Each card model's claim, for typical shapes given as (the GPU they ask, in milli and
    weighted by their counts; the models they are pinned to, None for any) on a cluster with
    `cards` cards of each model: for each pinned shape, its share of all the GPU asked divided
    by its models' share of the cards, summed per model. A shape pinned to models the cluster
    lacks still counts in the GPU asked.

    >>> model_claims([(3000, None), (1000, {"T4", "V100"})], {"T4": 1, "V100": 1, "G2": 8})
    {'T4': 1.25, 'V100': 1.25, 'G2': 0.0}
    """
    asked = list(demands)
    demand = sum(gpu for gpu, _ in asked)
    everywhere = sum(cards.values())
    claimed = dict.fromkeys(cards, 0.0)
    if not demand or not everywhere:
        return claimed
    for gpu, models in asked:
        if models is None:
            continue
        accepted = sum(n for model, n in cards.items() if model in models)
        if not gpu or not accepted:
            continue  # no GPU, or pinned to models the cluster lacks
        claim = float(gpu / demand) * everywhere / accepted
        for model in claimed.keys() & set(models):
            claimed[model] += claim
    return claimed


def expected_waste(fills: Mapping[int, int]) -> tuple[float, ...]:
    """For each free share of one card in whole percents, 0 .. 100: the milli it is expected to
    end with unused if pods keep landing on it, each drawn by its weight among those that still
    fit, until none fits. `fills`: the milli a pod takes of one card (counted in whole percents,
    rounded up, as pods ask for cores and memory: the MiB a card's free share is rounded from
    then decide nothing), and its weight.

    >>> waste = expected_waste({500: 1, 300: 1})
    >>> waste[20], waste[50], waste[70], waste[100]  # 70: 20 % after a 500, 10 % after 300s
    (200.0, 100.0, 150.0, 125.0)
    """
    step = MILLI // _PERCENT
    sizes = sorted(
        (-(-milli // step), weight) for milli, weight in fills.items() if milli > 0 and weight
    )
    waste = [0.0] * (_PERCENT + 1)
    for free in range(_PERCENT + 1):
        weighed = total = 0.0
        for size, weight in sizes:
            if size > free:
                break
            weighed += weight * waste[free - size]
            total += weight
        waste[free] = weighed / total if total else float(free * step)
    return tuple(waste)


@dataclass(frozen=True, slots=True)
class _Cards:
    """What a node's free cards alone decide (`BalancedTable._cards_of`)."""

    prefix: tuple[int, ...]  # free milli of the first i cards (largest free first)
    roomy_value: float  # the fragmentation when CPU and memory hold no shape back
    # per shape that fits the cards: count, cards, CPU, memory, cards with room for it, and the
    # CPU and memory from which it is not held back
    held: tuple[tuple[int, int, int, int, int, int, int], ...]
    cpu: int  # the CPU and memory from which no shape is held back
    memory: int


class BalancedTable:
    """The typical shapes as the nodes of one card model see them, and the fragmentation of a
    node state (free CPU, free memory, each card's free milli); remembered, bounded.

    `fitting`: the shapes that may use the model's cards, with the milli each takes of one;
    `total` counts every typical shape, `gpu_total` those that ask for GPU (the ones of them
    not fitting strand every free card); `claim` is the model's (`model_claims`)."""

    def __init__(
        self, fitting: Sequence[TypicalShape], total: int, gpu_total: int, claim: float
    ) -> None:
        self.total = total
        self.claim = claim
        self._never = gpu_total - sum(s.count for s in fitting)
        merged = Counter[tuple[int, int, int, int]]()  # equal needs pinned apart weigh as one
        for s in fitting:
            merged[s.milli, s.gpus, s.cpu, s.memory] += s.count
        self._needs: tuple[_Need, ...] = tuple((count, *need) for need, count in merged.items())
        fills = Counter[int]()  # a pod of g whole cards fills g cards
        for s in fitting:
            fills[min(s.milli, MILLI)] += s.count * (s.gpus if s.milli >= MILLI else 1)
        self._waste = expected_waste(fills)
        self._waste_weight = sum(s.count for s in fitting)
        self._cards: dict[tuple[int, ...], _Cards] = {}
        self._memo: dict[tuple[int, int, tuple[int, ...]], float] = {}

    @classmethod
    def of_model(cls, shapes: Sequence[TypicalShape], model: str, claim: float) -> "BalancedTable":
        """The table for the nodes of `model`, the shapes' milli the same on every model."""
        fitting = [s for s in shapes if s.takes(model)]
        gpu_total = sum(s.count for s in shapes if s.gpus)
        return cls(fitting, sum(s.count for s in shapes), gpu_total, claim)

    def score(self, gain: float, taken: int) -> int:
        """FGD-balanced's score, 0..99, of a placement that lowers the node's fragmentation
        (`fragmentation`, `total` x F_n) by `gain` and takes `taken` milli of its cards:
        floor(100 sigma(x)), x the drop in F_n less the claim on the milli taken, in cards;
        50 with no typical shapes.

        >>> BalancedTable([], 4, 4, claim=0.5).score(gain=4000.0, taken=1000)  # x = 1 - 0.5
        62
        """
        if not self.total:
            return 50
        x = (gain / self.total - self.claim * taken) / MILLI
        return math.floor(100 / (1 + math.exp(-x)))

    def fragmentation(self, cpu: int, memory: int, free: tuple[int, ...]) -> float:
        """F_n times `total`, in milli: for each GPU shape, the free milli of the cards too small
        for it or beyond what the node's CPU and memory let its pods reach (all of them when no
        pod of it fits), weighted by the shapes' counts; plus each card's expected waste
        (`expected_waste`) weighted by the fitting shapes' counts. `free` is sorted largest
        first."""
        cards = self._cards.get(free)
        if cards is None:
            cards = self._cards_of(free)
        if cpu >= cards.cpu and memory >= cards.memory:
            return cards.roomy_value  # no shape held back by CPU or memory
        key = (cpu, memory, free)
        known = self._memo.get(key)
        if known is not None:
            return known
        prefix = cards.prefix
        value = cards.roomy_value
        for count, gpus, needs_cpu, needs_memory, roomy, cpu_needed, memory_needed in cards.held:
            if cpu >= cpu_needed and memory >= memory_needed:
                continue
            if cpu < needs_cpu or memory < needs_memory:
                value += count * prefix[roomy]  # no pod fits: every card stranded
                continue
            reach = float(roomy)
            if cpu * gpus < needs_cpu * roomy:
                reach = cpu * gpus / needs_cpu
            if memory * gpus < needs_memory * reach:
                reach = memory * gpus / needs_memory
            if reach < roomy:
                whole = int(reach)
                value += count * (prefix[roomy] - prefix[whole] - (reach - whole) * free[whole])
        if len(self._memo) >= MEMO_LIMIT:
            self._memo.clear()
        self._memo[key] = value
        return value

    def _cards_of(self, free: tuple[int, ...]) -> _Cards:
        """What the cards alone decide: the value when CPU and memory hold no shape back, and
        the shapes they may hold back."""
        everything = sum(free)
        prefix = [0]
        for left in free:
            prefix.append(prefix[-1] + left)
        step, waste = MILLI // _PERCENT, self._waste
        left_over = sum(waste[min(max(left, 0), MILLI) // step] for left in free)
        value = self._never * everything + self._waste_weight * left_over
        rising = free[::-1]
        held = []
        for count, milli, gpus, needs_cpu, needs_memory in self._needs:
            roomy = len(free) - bisect_left(rising, milli)
            if roomy < gpus:
                value += count * everything
                continue
            value += count * (everything - prefix[roomy])
            cpu_needed = max(needs_cpu, -(-needs_cpu * roomy // gpus))
            memory_needed = max(needs_memory, -(-needs_memory * roomy // gpus))
            held.append((count, gpus, needs_cpu, needs_memory, roomy, cpu_needed, memory_needed))
        cpu = max((shape[5] for shape in held), default=0)
        memory = max((shape[6] for shape in held), default=0)
        cards = _Cards(tuple(prefix), float(value), tuple(held), cpu, memory)
        if len(self._cards) >= MEMO_LIMIT:
            self._cards.clear()
        self._cards[free] = cards
        return cards


class Balanced:
    """FGD-balanced against one workload's typical shapes, on a cluster with `cards` cards of
    each model (the claims; without them no model is claimed).

    >>> shapes = [TypicalShape(count=1, gpus=1, milli=1000, cpu=8000)]
    >>> policy = Balanced(MilliWorkload(shapes), cards={"T4": 4})
    >>> node = MilliNode("T4", cpu=16000, memory=65536, free=(1000, 1000, 1000, 1000))
    >>> policy.fragmentation(node)  # CPU for two more such pods: two of the four cards reached
    2000.0
    >>> policy.score(node, MilliPod(cpu=8000))  # CPU for one left: a third card unreached
    26
    """

    def __init__(self, workload: MilliWorkload, cards: Mapping[str, int]) -> None:
        self._shapes = workload.shapes
        self._claims = claims(workload.shapes, cards)
        self._tables: dict[str, BalancedTable] = {}
        self._scores: dict[_ScoreKey, int] = {}

    def table(self, model: str) -> BalancedTable:
        table = self._tables.get(model)
        if table is None:
            claim = self._claims.get(model, 0.0)
            table = self._tables[model] = BalancedTable.of_model(self._shapes, model, claim)
        return table

    def fragmentation(self, node: MilliNode) -> float:
        """F_n in milli."""
        table = self.table(node.model)
        if not table.total:
            return 0.0
        free = tuple(sorted(node.free, reverse=True))
        return table.fragmentation(node.cpu, node.memory, free) / table.total

    def score(self, node: MilliNode, pod: MilliPod) -> int:
        """The node's score for `pod` (which must fit it), 0..99."""
        free = tuple(sorted(node.free, reverse=True))
        key = (node.model, node.cpu, node.memory, free, pod.cpu, pod.memory, pod.gpus, pod.milli)
        known = self._scores.get(key)
        if known is None:
            table = self.table(node.model)
            start = table.fragmentation(node.cpu, node.memory, free)
            cpu, memory = node.cpu - pod.cpu, node.memory - pod.memory
            best = min(table.fragmentation(cpu, memory, left) for left in _placements(free, pod))
            known = table.score(start - best, pod.gpu_milli)
            if len(self._scores) >= MEMO_LIMIT:
                self._scores.clear()
            self._scores[key] = known
        return known

    def cards(self, node: MilliNode, pod: MilliPod) -> tuple[int, ...]:
        """The cards `pod` takes on `node` (which it must fit)."""
        table = self.table(node.model)
        start = table.fragmentation(node.cpu, node.memory, tuple(sorted(node.free, reverse=True)))
        cpu, memory = node.cpu - pod.cpu, node.memory - pod.memory

        def score(left: Sequence[int]) -> int:
            after = table.fragmentation(cpu, memory, tuple(sorted(left, reverse=True)))
            return table.score(start - after, pod.gpu_milli)

        return best_cards(node, pod, score)


def _placements(free: tuple[int, ...], pod: MilliPod) -> list[tuple[int, ...]]:
    """The node's cards (sorted largest first) after each way `pod` may take them: whole cards
    lead a sorted `free`; a share may go on any card with room (equal cards alike)."""
    if not pod.gpus:
        return [free]
    if pod.milli >= MILLI:
        return [tuple(sorted((0,) * pod.gpus + free[pod.gpus :], reverse=True))]
    options = []
    for i, room in enumerate(free):
        if room < pod.milli:
            break
        if i and room == free[i - 1]:
            continue
        left = list(free)
        left[i] = room - pod.milli
        options.append(tuple(sorted(left, reverse=True)))
    return options
