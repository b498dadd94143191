"""The pod shapes FGD weighs: the typical shapes the config gives (as the paper's replay does),
or else the domain's RecentShapes behind a lock (filters run on several threads), fed by
/filter and seeded from the config: an approximation of a workload's typical shapes that
follows it as it changes."""

import logging
import math
import threading

from vgpu.app.scheduler.config import Fragmentation, SeedShape
from vgpu.domain import PodPlan, Vendor
from vgpu.domain.fragmentation.cards import CardShape, CardWorkload, RecentShapes
from vgpu.domain.selectors import selector_from_annotations

log = logging.getLogger(__name__)

WEIGHT_UNIT = 1000  # a given shape's weight counts in thousandths: weights 2.5 and 1 stay exact


class ShapeWindow:
    """`announce`: log each change of the typical shapes at INFO (the cluster's default policy
    is FGD), else at DEBUG (only pods that ask for FGD by annotation use them)."""

    def __init__(self, settings: Fragmentation, vendor: Vendor, announce: bool = True) -> None:
        given = settings.given_shapes()
        self._fixed: CardWorkload | None = None
        if given:
            self._fixed = CardWorkload(
                _lowest([(card_shape(s, vendor), round(WEIGHT_UNIT * s.weight)) for s in given])
            )
        seeds = [(card_shape(seed, vendor), seed.weight) for seed in settings.seed_shapes]
        self._recent = RecentShapes(
            settings.window, settings.refresh, seeds, settings.coverage, settings.tolerance
        )
        self._lock = threading.Lock()
        self._shown = self.current()
        self._level = logging.INFO if announce else logging.DEBUG
        how = "given" if given else "learned from recent pods"
        log.log(self._level, "FGD weighs %s (%s)", describe(self._shown), how)

    def observe(self, plan: PodPlan) -> None:
        """A GPU pod asked for placement: its containers' shapes join the window (unless the
        typical shapes are given)."""
        if self._fixed is not None:
            return
        shapes = [
            CardShape.of(r, plan.selector, plan.host.cpu, plan.host.memory)
            for r in plan.requests
            if r is not None
        ]
        with self._lock:
            self._recent.observe(plan.key, shapes)
            now = self._recent.current()
            changed, self._shown = now is not self._shown, now
        if changed:
            log.log(self._level, "FGD weighs %s (pod %s the latest seen)", describe(now), plan.key)

    def current(self) -> CardWorkload:
        if self._fixed is not None:
            return self._fixed
        with self._lock:
            return self._recent.current()


def card_shape(shape: SeedShape, vendor: Vendor) -> CardShape:
    """A configured shape as FGD weighs it."""
    selector = selector_from_annotations({vendor.use_type_annotation: shape.gputype}, vendor)
    return CardShape(
        shape.gpus,
        shape.memory,
        shape.memory_percent,
        shape.cores,
        selector.use_types,
        cpu=shape.cpu,
        host_memory=shape.host_memory,
    )


def _lowest(weighted: list[tuple[CardShape, int]]) -> list[tuple[CardShape, int]]:
    """The same shares in the smallest whole counts: a trace's own counts for shapes taken from
    it, so that FGD-balanced's fractional arithmetic is the trace replay's to the last bit."""
    common = math.gcd(*(count for _, count in weighted))
    return [(shape, count // common) for shape, count in weighted] if common > 1 else weighted


def describe(workload: CardWorkload) -> str:
    """`3 typical shapes: 1 card 46% memory 46% cores 4000m CPU (40%), ...` for the log."""
    if not workload.shapes:
        return "no pod shapes yet (every placement scores alike: nodes by name)"
    total = sum(count for _, count in workload.shapes)
    parts = []
    for shape, count in workload.shapes[:5]:
        memory = f"{shape.memory} MiB" if shape.memory else f"{shape.memory_percent}%"
        cards = f"{shape.count} card(s) {memory} memory {shape.cores}% cores" if shape.count else ""
        cpu = f"{shape.cpu}m CPU" if shape.cpu or not shape.count else ""
        parts.append(f"{' '.join(p for p in (cards, cpu) if p)} ({count / total:.0%})")
    more = f" and {len(workload.shapes) - 5} more" if len(workload.shapes) > 5 else ""
    return f"{len(workload.shapes)} typical shapes: {', '.join(parts)}{more}"
