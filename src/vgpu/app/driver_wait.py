"""Waiting for the NVIDIA driver at start, instead of exiting while it is not there yet.

On a node where the GPU operator installs the driver, the device plugin and the monitor can
start before the driver is loaded. `DriverWait.wait` calls the GPU port (NVML) again and again,
1 s apart at first and then twice as long each time, up to `retry_max` seconds apart, until it
answers or `timeout` seconds have passed. Meanwhile `on_wait` is told why (the readiness
endpoint says "waiting for the NVIDIA driver: ..."), and the log says so once, again when the
reason changes, and at most once a minute in between. After the timeout the last GpuUnavailable
is raised and the process exits: a container started before the NVIDIA runtime had the driver's
libraries never gets them, so a fresh container (the kubelet restarts it) is the way forward.
"""

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from vgpu.ports.gpu import GpuUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_RETRY = 1.0
LOG_EVERY = 60.0


class DriverWait(Generic[T]):
    def __init__(
        self,
        probe: Callable[[], T],
        timeout: float,
        retry_max: float,
        on_wait: Callable[[str], None] = lambda why: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._probe = probe
        self._timeout = timeout
        self._retry_max = retry_max
        self._on_wait = on_wait
        self._clock = clock
        self._reason = ""  # the last reason logged
        self._logged_at = 0.0

    def wait(self, stop: threading.Event) -> T | None:
        """What the probe returned once it worked; None when `stop` was set first. Raises the
        probe's GpuUnavailable at once when `timeout` is 0, else once it has passed."""
        started = self._clock()
        delay = FIRST_RETRY
        self._reason, self._logged_at = "", started
        while True:
            try:
                found = self._probe()
            except GpuUnavailable as exc:
                waited = self._clock() - started
                left = self._timeout - waited
                if left <= 0:
                    self._give_up(waited)
                    raise
                self._report(str(exc), waited)
                if stop.wait(min(delay, left)):
                    return None
                delay = min(delay * 2, self._retry_max)
                continue
            if self._reason:
                log.info("the NVIDIA driver answered after %.0f s", self._clock() - started)
            return found

    def _report(self, reason: str, waited: float) -> None:
        """Readiness always; the log on a new reason, and at most once a minute otherwise."""
        self._on_wait(f"waiting for the NVIDIA driver: {reason}")
        now = self._clock()
        if reason != self._reason:
            self._reason, self._logged_at = reason, now
            log.warning(
                "waiting for the NVIDIA driver (up to %.0f s, driver_wait): %s",
                self._timeout,
                reason,
            )
        elif now - self._logged_at >= LOG_EVERY:
            self._logged_at = now
            log.warning("still waiting for the NVIDIA driver after %.0f s: %s", waited, reason)

    def _give_up(self, waited: float) -> None:
        if self._timeout > 0:
            log.error(
                "gave up waiting for the NVIDIA driver after %.0f s (driver_wait): exiting, so "
                "that the kubelet starts a fresh container, into which the NVIDIA runtime "
                "mounts the driver's libraries",
                waited,
            )
