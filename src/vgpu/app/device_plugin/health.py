"""Feeds GPU health events from the GpuPort into the GPU state (the device plugin's, or the
DRA driver's)."""

import logging
import threading
from collections.abc import Iterable
from typing import Protocol

from vgpu.domain.inventory import HealthEvent
from vgpu.ports.gpu import GpuPort

log = logging.getLogger(__name__)


class HealthSink(Protocol):
    def apply(self, events: Iterable[HealthEvent]) -> bool:
        """Record health changes; True when anything changed."""
        ...


class HealthWatcher:
    def __init__(
        self, port: GpuPort, gpus: HealthSink, poll_s: float = 1.0, retry_s: float = 5.0
    ) -> None:
        self._port = port
        self._gpus = gpus
        self._poll = poll_s
        self._retry = retry_s

    def step(self) -> bool:
        """Wait up to one poll for events and apply them; True when health changed."""
        return self._gpus.apply(self._port.wait_for_health_events(self._poll))

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.step()
            except Exception:  # keep watching: one failed read must not end health checks
                log.exception("reading GPU health failed; retrying in %.0f s", self._retry)
                stop.wait(self._retry)
