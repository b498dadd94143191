"""The pod shapes a workload is made of, which FGD measures a node's fragmentation against.

A workload's *typical* shapes are its commonest (CPU, card count, milli per card, models)
combinations, most frequent first, taken until they cover a share of its pods (95 % in the
paper); each weighs its share of the kept pods.
"""

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from vgpu.domain.fragmentation.milli import MilliPod

COVERAGE = 0.95  # the typical shapes cover this share of the pods (the FGD paper's)
MEMO_LIMIT = 1 << 17  # node states remembered per card model (a long-lived scheduler's bound)
_Shape = tuple[int, int, int, frozenset[str]]  # cards, milli, CPU, models
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class TypicalShape:
    """A pod shape of the workload and how many of its pods have it."""

    count: int
    gpus: int
    milli: int
    cpu: int = 0
    models: frozenset[str] = frozenset()  # empty: any model
    memory: int = 0  # host memory (MiB), the mean of its pods' (not part of the shape's key)

    def takes(self, model: str) -> bool:
        """Whether the shape asks for GPU and accepts cards of `model`."""
        return self.gpus > 0 and (not self.models or model in self.models)


def typical_shapes(
    pods: Iterable[MilliPod], coverage: float = COVERAGE
) -> tuple[TypicalShape, ...]:
    """The commonest shapes of `pods` (memory aside) until they cover `coverage` of them; among
    equally common shapes the larger (more GPU, then more CPU) first. Each carries the mean
    host memory of its pods.

    >>> pods = [MilliPod(1000, 0, 1, 500)] * 3 + [MilliPod(2000, 0, 1, 1000)] + [MilliPod(0, 0)]
    >>> [(s.count, s.gpus, s.milli) for s in typical_shapes(pods, coverage=0.8)]
    [(3, 1, 500), (1, 1, 1000)]
    """
    counts: Counter[_Shape] = Counter()
    memory: Counter[_Shape] = Counter()
    for p in pods:
        key = (p.gpus, p.milli, p.cpu, p.models)
        counts[key] += 1
        memory[key] += p.memory
    kept = commonest(counts, coverage, _size)
    return tuple(
        TypicalShape(count, *key, memory=round(memory[key] / count)) for key, count in kept
    )


def commonest(
    counts: Mapping[K, int], coverage: float, size: Callable[[K], tuple[object, ...]]
) -> list[tuple[K, int]]:
    """The most frequent keys, the larger by `size` first among equals, until they cover
    `coverage` of all the counts."""
    ordered = sorted(counts.items(), key=lambda item: size(item[0]), reverse=True)
    ordered.sort(key=lambda item: -item[1])
    wanted = coverage * sum(counts.values())
    kept: list[tuple[K, int]] = []
    covered = 0
    for key, count in ordered:
        if covered >= wanted and kept:
            break
        kept.append((key, count))
        covered += count
    return kept


def _size(shape: _Shape) -> tuple[int, int, int, list[str]]:
    gpus, milli, cpu, models = shape
    return gpus * milli, cpu, gpus, sorted(models)


class ShapeTable:
    """A workload's typical shapes as the nodes of one card model see them (`fitting`: those
    that may use its cards, with the milli they take of each; the others, `total` counting
    them too, strand every free milli), and the fragmentation of node states (remembered:
    nodes in the same state are many)."""

    def __init__(self, fitting: Sequence[TypicalShape], total: int) -> None:
        self.total = total
        self._never = total - sum(s.count for s in fitting)
        self._cpus = sorted({s.cpu for s in fitting})
        # (count, the level a node's free CPU needs for the shape, milli, cards)
        self._fitting = tuple(
            (s.count, bisect_right(self._cpus, s.cpu), s.milli, s.gpus) for s in fitting
        )
        self._memo: dict[tuple[int, tuple[int, ...]], int] = {}

    def level(self, cpu: int) -> int:
        """How many of the shapes' CPU sizes `cpu` covers: nodes whose free CPU has the same
        level have the same fragmentation, everything else alike."""
        return bisect_right(self._cpus, cpu)

    def fragmentation(self, level: int, free: tuple[int, ...]) -> int:
        """The paper's F_n times `total`: for each shape, the free milli of the cards too small
        for it when the node can take it (CPU, model, enough cards), else all its free milli;
        weighted by the shapes' counts. `free` is sorted largest first."""
        key = (level, free)
        known = self._memo.get(key)
        if known is not None:
            return known
        everything = sum(free)
        value = self._never * everything
        for count, needed, milli, gpus in self._fitting:
            roomy = 0
            stranded = 0
            for left in free:
                if left >= milli:
                    roomy += 1
                else:
                    stranded += left
            fits = roomy >= gpus and level >= needed
            value += count * (stranded if fits else everything)
        if len(self._memo) >= MEMO_LIMIT:
            self._memo.clear()
        self._memo[key] = value
        return value


class MilliWorkload:
    """Typical shapes, the same milli on every card model, with one `ShapeTable` per model,
    made on first need."""

    def __init__(self, shapes: Sequence[TypicalShape]) -> None:
        self.shapes = tuple(shapes)
        self._tables: dict[str, ShapeTable] = {}

    def table(self, model: str) -> ShapeTable:
        table = self._tables.get(model)
        if table is None:
            fitting = [s for s in self.shapes if s.takes(model)]
            table = self._tables[model] = ShapeTable(fitting, sum(s.count for s in self.shapes))
        return table
