"""Priority feedback to HAMi-core, with the rules of HAMi's monitor
(docs/protocol.md#priority-feedback).

Every tick, for the containers whose region could be read:

1. a container whose `recent_kernel` is above 0 has it decremented; if it is still above 0 the
   container is active, and counts on each of its GPUs under its priority (a negative priority
   is not counted);
2. a container sharing a GPU with an active container of a strictly smaller priority number
   (a higher priority) is blocked: `recent_kernel` = -1 (if it was >= 0), which makes
   HAMi-core hold its kernel launches; an unblocked container with a negative value gets 0;
3. `utilization_switch` = 1 (enforce the SM limit) when the container is blocked or shares a
   GPU with another active container of its own priority, else 0.

`plan` computes the writes; `apply_plan` makes them through the AccountingPort.
"""

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from vgpu.ports.accounting import AccountingPort, CacheDir, Region, RegionUnavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Feedback:
    """What to store in one container's region; `recent_kernel` None means leave it."""

    entry: CacheDir
    recent_kernel: int | None
    utilization_switch: int


def plan(regions: Iterable[tuple[CacheDir, Region]]) -> list[Feedback]:
    states = []
    active: Counter[tuple[str, int]] = Counter()
    for entry, region in regions:
        gpus = {uuid for uuid in region.uuids if uuid}
        kernel = region.recent_kernel
        if kernel > 0:
            kernel -= 1
            if kernel > 0 and region.priority >= 0:
                active.update((uuid, region.priority) for uuid in gpus)
        states.append((entry, region, gpus, kernel))
    result = []
    for entry, region, gpus, kernel in states:
        higher = {p for (uuid, p), n in active.items() if uuid in gpus and n > 0}
        blocked = any(p < region.priority for p in higher)
        if blocked and kernel >= 0:
            kernel = -1
        elif not blocked and kernel < 0:
            kernel = 0
        crowded = any(active[(uuid, region.priority)] > 1 for uuid in gpus)
        result.append(
            Feedback(
                entry,
                kernel if kernel != region.recent_kernel else None,
                1 if blocked or crowded else 0,
            )
        )
    return result


def apply_plan(port: AccountingPort, feedback: Iterable[Feedback]) -> None:
    """Store each container's fields; a region that fails is logged and the rest go on."""
    for item in feedback:
        try:
            if item.recent_kernel is not None:
                port.set_recent_kernel(item.entry, item.recent_kernel)
            port.set_utilization_switch(item.entry, item.utilization_switch)
        except RegionUnavailable as err:
            log.warning("no priority feedback for %s: %s", item.entry.path, err)
