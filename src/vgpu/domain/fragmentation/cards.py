"""FGD on the cards vgpu registers: free shares in milli, the pod shapes a scheduler has seen
lately, and the score of a placement.

A card's free share is the smaller of its free cores and its free memory, in thousandths of
the card; a card that takes no more slices (split count spent, unhealthy, cordoned, in MIG
mode) has none. A slice of a request takes the larger of its cores and its memory on the card.
For a share of `m` milli asked the openb way (`gpucores` = `gpumem-percentage` = m / 10) both
are exactly `m`, so the scheduler scores as the trace replay does. A shape's CPU counts as the
replay's does: a node whose free CPU is below it cannot take the shape (a node whose CPU is not
known is taken to have enough for every shape); a shape of no cards (a CPU-only pod) never fits
and strands all the free GPU. A shape's host memory is FGD-balanced's alone
(`card_balanced.py`), as its card kinds' counts in the cluster are.
"""

import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from vgpu.domain.device import IDLE, MIG_MODE, Device, Usage
from vgpu.domain.fragmentation.card_balanced import (
    CardBalanced,
    CardCounts,
    CardKind,
    Host,
    card_kind,
    fitting_shapes,
)
from vgpu.domain.fragmentation.fgd import gain_score, score_change
from vgpu.domain.fragmentation.milli import MILLI
from vgpu.domain.fragmentation.workload import COVERAGE, ShapeTable, commonest
from vgpu.domain.request import ContainerRequest
from vgpu.domain.selectors import CardSelector

_ANY_CPU = 1 << 62  # a node's CPU as FGD sees it here: enough for every shape
WINDOW = 1000  # pods whose shapes are kept
REFRESH = 100  # new pods before the typical shapes are worked out again
TOLERANCE = 0.05  # shares that move less keep the typical shapes as they are


@dataclass(frozen=True, slots=True)
class CardShape:
    """What one container asks of each card it gets, which card types it accepts, and the CPU
    (milli-cores) and host memory (MiB) its pod asks of the node."""

    count: int
    memory: int = 0  # MiB per card; 0: `memory_percent` of the card
    memory_percent: int = 100
    cores: int = 0
    use_types: tuple[tuple[str, ...], ...] = ()
    avoid_types: tuple[tuple[str, ...], ...] = ()
    cpu: int = 0
    host_memory: int = 0

    @classmethod
    def of(
        cls,
        request: ContainerRequest,
        selector: CardSelector,
        cpu: int = 0,
        host_memory: int = 0,
    ) -> "CardShape":
        return cls(
            request.count,
            request.memory,
            request.memory_percent,
            request.cores,
            selector.use_types,
            selector.avoid_types,
            cpu,
            host_memory,
        )

    @property
    def pinned(self) -> bool:
        """Whether the shape names the card types it takes or avoids."""
        return bool(self.use_types or self.avoid_types)

    def taken_on(self, device: Device) -> int:
        """The milli one slice takes of `device`."""
        request = ContainerRequest(self.count, self.memory, self.memory_percent, self.cores)
        return taken_milli(request, device)

    def accepts(self, device: Device) -> bool:
        """Whether the shape may use `device` (never, for a shape of no cards)."""
        return self.count > 0 and CardSelector(self.use_types, self.avoid_types).type_ok(device)


def free_milli(device: Device, used: Usage, cordoned: bool = False) -> int:
    """The card's free share in milli.

    >>> card = Device("GPU-0", 0, "NVIDIA T4", count=20, memory=15360, cores=100)
    >>> free_milli(card, Usage(slices=2, memory=7065, cores=46))  # cores: 540, memory: 540.0
    540
    >>> free_milli(card, Usage(slices=1, memory=12000, cores=10))  # memory binds
    218
    """
    if cordoned or not device.healthy or device.mode == MIG_MODE or used.slices >= device.count:
        return 0
    cores = _share(device.cores - used.cores, device.cores)
    memory = _share(device.memory - used.memory, device.memory)
    return min(cores, memory)


def taken_milli(request: ContainerRequest, device: Device) -> int:
    """The milli one slice of `request` takes of `device`: its cores or memory, the larger.

    >>> card = Device("GPU-0", 0, "NVIDIA T4", count=20, memory=15360, cores=100)
    >>> taken_milli(ContainerRequest(1, memory_percent=46, cores=46), card)
    460
    >>> taken_milli(ContainerRequest(1, memory=7680), card)
    500
    """
    if request.cores >= 100:  # an exclusive card
        return MILLI
    cores = math.ceil(MILLI * request.cores / device.cores) if device.cores > 0 else 0
    memory = request.memory_on(device)
    taken = math.ceil(MILLI * memory / device.memory) if device.memory > 0 else 0
    return min(MILLI, max(cores, taken))


def node_shares(
    devices: Sequence[Device],
    usage: Mapping[str, Usage],
    cordoned: frozenset[str],
    extra: Mapping[str, Usage] | None = None,
) -> list[int]:
    """Each card's free share, with `extra` (a pod's footprint) in use too."""
    shares = []
    for device in devices:
        used = usage.get(device.uuid, IDLE)
        if extra and device.uuid in extra:
            used = used + extra[device.uuid]
        shares.append(free_milli(device, used, device.uuid in cordoned))
    return shares


class CardWorkload:
    """Card shapes with their counts, and a `ShapeTable` per card kind (type, memory, cores)
    that has each shape's milli on such a card."""

    def __init__(self, shapes: Sequence[tuple[CardShape, int]]) -> None:
        self.shapes = tuple(shapes)
        self._total = sum(count for _, count in shapes)
        self._tables: dict[CardKind, ShapeTable] = {}
        self._hash = hash(self.shapes)
        self._cuts: tuple[int, ...] | None = None
        self._balanced: CardBalanced | None = None

    # equal shapes score alike: pods planned apart with the same shapes share what a ledger
    # remembers per pod shape
    def __eq__(self, other: object) -> bool:
        return isinstance(other, CardWorkload) and other.shapes == self.shapes

    def __hash__(self) -> int:
        return self._hash

    @property
    def cpu_cuts(self) -> tuple[int, ...]:
        """The shapes' CPU sizes, sorted: nodes whose free CPU covers the same of them (its
        `bisect_right` in these) have the same fragmentation, everything else alike."""
        cuts = self._cuts
        if cuts is None:
            cuts = self._cuts = tuple(sorted({shape.cpu for shape, _ in self.shapes}))
        return cuts

    def balanced(self, cards: CardCounts) -> CardBalanced:
        """FGD-balanced against these shapes on a cluster with these cards (the last asked for
        is kept: its tables remember node states)."""
        kept = self._balanced
        if kept is None or kept.cards != cards:
            kept = self._balanced = CardBalanced(self.shapes, cards)
        return kept

    def table_for(self, device: Device) -> ShapeTable:
        kind = card_kind(device)
        table = self._tables.get(kind)
        if table is None:
            table = self._tables[kind] = ShapeTable(
                fitting_shapes(self.shapes, device), self._total
            )
        return table

    def score(
        self,
        devices: Sequence[Device],
        before: Sequence[int],
        after: Sequence[int],
        host: Host = None,
        host_after: Host = None,
    ) -> int:
        """FGD's score (0..99) for a node of these cards whose free shares go from `before` to
        `after` and whose free CPU and memory go from `host` to `host_after` (None: enough for
        every shape; FGD reads only the CPU); its first card's kind stands for the node's."""
        table = self.table_for(devices[0])
        return score_change(table, _level(table, host), before, _level(table, host_after), after)

    def card_scores(
        self,
        devices: Sequence[Device],
        before: Sequence[int],
        changes: Sequence[tuple[int, int]],
        host: Host = None,
        host_after: Host = None,
    ) -> list[int]:
        """`score` for each (card position, its free share after) change on its own."""
        table = self.table_for(devices[0])
        start = table.fragmentation(_level(table, host), tuple(sorted(before, reverse=True)))
        level = _level(table, host_after)
        scores = []
        for position, share in changes:
            after = list(before)
            after[position] = share
            gain = start - table.fragmentation(level, tuple(sorted(after, reverse=True)))
            scores.append(gain_score(gain, table.total))
        return scores


def pod_workload(
    requests: Iterable[ContainerRequest | None], selector: CardSelector
) -> CardWorkload:
    """A pod's own shapes as the workload: what FGD weighs when it knows no other."""
    return CardWorkload([(CardShape.of(r, selector), 1) for r in requests if r is not None])


class RecentShapes:
    """The shapes of the last `window` GPU pods seen (a pod once, however often it is asked
    about), which FGD measures fragmentation against. Until `window` pods have been seen the
    `seeds` (shapes a cluster knows it runs, with relative weights) fill the rest of it. The
    typical shapes are worked out again every `refresh` new pods, and replace the current ones
    only when the shares moved by more than `tolerance` (total variation distance): a
    scheduler's remembered answers, which new shapes void, last while the workload holds.
    Host memory is not part of a shape, as in the trace replay: pods alike but for it count as
    one shape, whose host memory is the mean of theirs (a mean that moves by more than
    `tolerance` of itself replaces the shapes too)."""

    def __init__(
        self,
        window: int = WINDOW,
        refresh: int = REFRESH,
        seeds: Sequence[tuple[CardShape, float]] = (),
        coverage: float = COVERAGE,
        tolerance: float = TOLERANCE,
    ) -> None:
        self._window = window
        self._refresh = refresh
        self._seeds = tuple(seeds)
        self._coverage = coverage
        self._tolerance = tolerance
        self._recent: deque[tuple[str, tuple[CardShape, ...]]] = deque()
        self._keys: set[str] = set()
        self._counts: Counter[CardShape] = Counter()
        self._memory: Counter[CardShape] = Counter()  # host memory summed, per shape
        self._unseen = 0  # pods seen since the typical shapes were worked out
        self._current = CardWorkload(())
        self._current = self._typical()

    def observe(self, pod: str, shapes: Iterable[CardShape]) -> None:
        """A pod asked for placement with one shape per GPU container."""
        if pod in self._keys:
            return
        kept = tuple(shapes)
        self._recent.append((pod, kept))
        self._keys.add(pod)
        for shape in kept:
            key = _key(shape)
            self._counts[key] += 1
            self._memory[key] += shape.host_memory
        if len(self._recent) > self._window:
            gone, old = self._recent.popleft()
            self._keys.discard(gone)
            for shape in old:  # a shape no pod in the window has any more leaves the counts
                key = _key(shape)
                left = self._counts[key] - 1
                self._memory[key] -= shape.host_memory
                if left:
                    self._counts[key] = left
                else:
                    del self._counts[key], self._memory[key]
        self._unseen += 1
        if self._unseen >= self._refresh:
            self._current = self._typical()

    def current(self) -> CardWorkload:
        """The typical shapes now. Before any pod is seen and without seeds: none (every
        placement then scores 50, and ties go by node name)."""
        if self._unseen and not self._current.shapes:
            self._current = self._typical()  # the first pods: no need to wait for `refresh`
        return self._current

    def _typical(self) -> CardWorkload:
        self._unseen = 0
        # in thousandths of a pod, as seeds fill the window's room in proportion to weights
        counts = {shape: n * 1000 for shape, n in self._counts.items()}
        memory = {shape: n * 1000 for shape, n in self._memory.items()}
        room = self._window - len(self._recent)
        weights = sum(weight for _, weight in self._seeds)
        if room > 0 and weights > 0:
            for shape, weight in self._seeds:
                key, share = _key(shape), round(1000 * room * weight / weights)
                counts[key] = counts.get(key, 0) + share
                memory[key] = memory.get(key, 0) + share * shape.host_memory
        kept = commonest(counts, self._coverage, _size)
        typical = [(_with_memory(key, memory[key], n), n) for key, n in kept]
        current = self._current.shapes
        if (
            current
            and _moved(current, kept) <= self._tolerance
            and _memory_moved(current, typical) <= self._tolerance
        ):
            return self._current  # about the same shapes: answers remembered stay good
        return CardWorkload(typical)


def _moved(old: Sequence[tuple[CardShape, int]], new: Sequence[tuple[CardShape, int]]) -> float:
    """How far two sets of weighted shapes are apart: the total variation distance of their
    shares, 0 (alike) .. 1 (no shape in common).

    >>> a, b = CardShape(1, cores=10), CardShape(1, cores=50)
    >>> _moved([(a, 3), (b, 1)], [(a, 1), (b, 1)])
    0.25
    """
    shares: dict[CardShape, float] = {}
    for weighted, sign in ((old, -1.0), (new, 1.0)):
        total = sum(count for _, count in weighted)
        for shape, count in weighted:
            key = _key(shape)
            shares[key] = shares.get(key, 0.0) + sign * count / total
    return sum(abs(v) for v in shares.values()) / 2


def _memory_moved(
    old: Sequence[tuple[CardShape, int]], new: Sequence[tuple[CardShape, int]]
) -> float:
    """How far the host memory of shapes in both moved, relative to the larger: the most.

    >>> a = CardShape(1, cores=10)
    >>> _memory_moved([(replace(a, host_memory=900), 1)], [(replace(a, host_memory=1000), 1)])
    0.1
    """
    was = {_key(shape): shape.host_memory for shape, _ in old}
    moved = 0.0
    for shape, _ in new:
        before = was.get(_key(shape))
        larger = max(before or 0, shape.host_memory)
        if before is not None and larger:
            moved = max(moved, abs(shape.host_memory - before) / larger)
    return moved


def _with_memory(key: CardShape, memory: int, count: int) -> CardShape:
    """The shape with the mean host memory of its pods (`memory` summed over `count`)."""
    mean = round(memory / count) if count else 0
    return replace(key, host_memory=mean) if mean else key


def _key(shape: CardShape) -> CardShape:
    """The shape as the window counts it: its host memory aside."""
    return replace(shape, host_memory=0) if shape.host_memory else shape


def _size(shape: CardShape) -> tuple[object, ...]:
    return shape.count, shape.cores, shape.memory, shape.memory_percent, shape.cpu, shape.use_types


def _level(table: ShapeTable, host: Host) -> int:
    return table.level(_ANY_CPU if host is None else host[0])


def _share(free: int, whole: int) -> int:
    if whole <= 0:
        return MILLI
    return MILLI * max(free, 0) // whole
