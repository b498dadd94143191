"""The pod shapes the scheduler has seen lately, which FGD weighs: the domain's RecentShapes
behind a lock (filters run on several threads), fed by /filter, seeded from the config."""

import logging
import threading

from vgpu.app.scheduler.config import Fragmentation
from vgpu.domain import PodPlan, Vendor
from vgpu.domain.fragmentation.cards import CardShape, CardWorkload, RecentShapes
from vgpu.domain.selectors import selector_from_annotations

log = logging.getLogger(__name__)


class ShapeWindow:
    """`announce`: log each change of the typical shapes at INFO (the cluster's default policy
    is FGD), else at DEBUG (only pods that ask for FGD by annotation use them)."""

    def __init__(self, settings: Fragmentation, vendor: Vendor, announce: bool = True) -> None:
        seeds = [
            (
                CardShape(
                    seed.gpus,
                    seed.memory,
                    seed.memory_percent,
                    seed.cores,
                    selector_from_annotations(
                        {vendor.use_type_annotation: seed.gputype}, vendor
                    ).use_types,
                ),
                seed.weight,
            )
            for seed in settings.seed_shapes
        ]
        self._recent = RecentShapes(
            settings.window, settings.refresh, seeds, settings.coverage, settings.tolerance
        )
        self._lock = threading.Lock()
        self._shown = self._recent.current()
        self._level = logging.INFO if announce else logging.DEBUG
        log.log(self._level, "FGD weighs %s", describe(self._shown))

    def observe(self, plan: PodPlan) -> None:
        """A GPU pod asked for placement: its containers' shapes join the window."""
        shapes = [CardShape.of(r, plan.selector) for r in plan.requests if r is not None]
        with self._lock:
            self._recent.observe(plan.key, shapes)
            now = self._recent.current()
            changed, self._shown = now is not self._shown, now
        if changed:
            log.log(self._level, "FGD weighs %s (pod %s the latest seen)", describe(now), plan.key)

    def current(self) -> CardWorkload:
        with self._lock:
            return self._recent.current()


def describe(workload: CardWorkload) -> str:
    """`3 typical shapes: 1 card 46% memory 46% cores (40%), ...` for the log."""
    if not workload.shapes:
        return "no pod shapes yet (every placement scores alike: nodes by name)"
    total = sum(count for _, count in workload.shapes)
    parts = []
    for shape, count in workload.shapes[:5]:
        memory = f"{shape.memory} MiB" if shape.memory else f"{shape.memory_percent}%"
        parts.append(
            f"{shape.count} card(s) {memory} memory {shape.cores}% cores ({count / total:.0%})"
        )
    more = f" and {len(workload.shapes) - 5} more" if len(workload.shapes) > 5 else ""
    return f"{len(workload.shapes)} typical shapes: {', '.join(parts)}{more}"
