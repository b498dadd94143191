"""The takeover exit check: how many bound pods are counted without a grant signed with
vgpu's key.

Those are HAMi's running pods (unsigned, believed or not), pods placed while signing was off,
and pods whose annotations were edited since they were counted. Signing can be enforced, and
HAMi retired, once none is left: the leader says so in a log line every `REPORT_PERIOD` seconds
while any is left (how many, the first few), once when the count reaches 0, and in the gauge
`vgpu_unsigned_grants_counted` (metrics.py).
"""

import logging

from vgpu.app.scheduler.fence import Fence
from vgpu.app.scheduler.occupancy import OccupancyBook

log = logging.getLogger(__name__)

REPORT_PERIOD = 60.0
NAMED = 5  # pods named in the log line


class TakeoverReport:
    def __init__(self, book: OccupancyBook, fence: Fence) -> None:
        self._book = book
        self._fence = fence
        self._last: int | None = None

    def report(self) -> None:
        """On the leader, log how many bound pods are counted without a believed grant."""
        if not self._fence.leading:
            return
        unsigned = self._book.unsigned()
        if unsigned:
            more = f" and {len(unsigned) - NAMED} more" if len(unsigned) > NAMED else ""
            log.info(
                "takeover check: %d bound pod(s) are counted without a signed grant (%s%s): "
                "HAMi's pods, pods placed while signing was off, or pods whose grant annotations "
                "were edited; when this is 0, HAMi's pods are gone and signing can be enforced",
                len(unsigned),
                ", ".join(unsigned[:NAMED]),
                more,
            )
        elif self._last != 0:
            log.info(
                "takeover check: every bound pod counted has a signed grant: HAMi's pods are "
                "gone and signing can be enforced"
            )
        self._last = len(unsigned)
