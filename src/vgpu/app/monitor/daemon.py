"""The monitor's loop: every few seconds, clean up stale directories and give feedback.

Each tick lists the cache directories; removes those of pods that left the node (after the
grace period); reads the rest, logging a region that cannot be read when its reason first
appears or changes; and, with priority feedback on, writes HAMi-core's two feedback fields.
"""

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from vgpu.app.monitor import feedback
from vgpu.app.monitor.pods import stale
from vgpu.domain.pod import Pod
from vgpu.ports.accounting import (
    AccountingPort,
    CacheDir,
    Region,
    RegionNotReady,
    RegionUnavailable,
)
from vgpu.ports.cluster import ClusterError

log = logging.getLogger(__name__)


class MonitorDaemon:
    def __init__(
        self,
        accounting: AccountingPort,
        pods: Callable[[], Sequence[Pod]],
        *,
        interval: float,
        cleanup_grace: float,
        priority_feedback: bool,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._accounting = accounting
        self._pods = pods
        self._interval = interval
        self._grace = cleanup_grace
        self._feedback = priority_feedback
        self._clock = clock
        self._problems: dict[Path, str] = {}  # directory -> why its region is unreadable

    def run(self, stop: threading.Event) -> None:
        """Tick until `stop` is set; a failing tick is logged and the next one comes anyway."""
        while not stop.is_set():
            try:
                self.tick()
            except Exception:
                log.exception("monitor tick failed; trying again in %.0f s", self._interval)
            stop.wait(self._interval)

    def tick(self) -> None:
        dirs = self._accounting.list_dirs()
        removed = {entry.path for entry in self._clean_up(dirs)}
        readable = []
        for entry in dirs:
            if entry.path in removed:
                continue
            region = self._read(entry)
            if region is not None:
                readable.append((entry, region))
        present = {entry.path for entry in dirs}
        self._problems = {p: r for p, r in self._problems.items() if p in present}
        if self._feedback:
            feedback.apply_plan(self._accounting, feedback.plan(readable))

    def _clean_up(self, dirs: list[CacheDir]) -> list[CacheDir]:
        try:
            pods = self._pods()
        except ClusterError as err:
            log.warning("not cleaning up cache directories: cannot list this node's pods (%s)", err)
            return []
        gone = stale(dirs, pods, self._clock(), self._grace)
        for entry in gone:
            log.info("removing %s: pod %s is no longer on this node", entry.path, entry.pod_uid)
            self._accounting.remove(entry)
        return gone

    def _read(self, entry: CacheDir) -> Region | None:
        try:
            region = self._accounting.read(entry)
        except RegionUnavailable as err:
            reason = str(err)
            if self._problems.get(entry.path) != reason:
                self._problems[entry.path] = reason
                level = logging.DEBUG if isinstance(err, RegionNotReady) else logging.WARNING
                log.log(level, "skipping the region of %s: %s", entry.path, reason)
            return None
        if self._problems.pop(entry.path, None) is not None:
            log.info("the region of %s is readable again", entry.path)
        return region
