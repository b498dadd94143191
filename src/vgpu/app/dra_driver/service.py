"""The DRA driver's answers to the kubelet (DraPluginHandler): Prepare and Unprepare go to the
preparer, health comes from the GPU state, and the kubelet's word on the registration is
logged."""

import logging
from collections.abc import Callable, Iterator, Sequence

from vgpu.app.dra_driver.gpus import DraGpus
from vgpu.app.dra_driver.prepare import ClaimPreparer
from vgpu.ports.dra import ClaimOutcome, ClaimRef, DeviceHealthReport, RegistrationStatus

log = logging.getLogger(__name__)

HEALTH_POLL_S = 1.0  # how often a health stream checks that the kubelet still listens


class DraDriverService:
    def __init__(self, preparer: ClaimPreparer, gpus: DraGpus, driver: str) -> None:
        self._preparer = preparer
        self._gpus = gpus
        self._driver = driver
        self.registered: RegistrationStatus | None = None

    def prepare(self, claims: Sequence[ClaimRef]) -> dict[str, ClaimOutcome]:
        return self._preparer.prepare(claims)

    def unprepare(self, claims: Sequence[ClaimRef]) -> dict[str, str]:
        return self._preparer.unprepare(claims)

    def watch_health(self, active: Callable[[], bool]) -> Iterator[list[DeviceHealthReport]]:
        """Every GPU's health, then each change, while the kubelet listens."""
        seen = self._gpus.generation
        last = {report.device: report for report in self._gpus.health()}
        yield list(last.values())
        while active():
            generation = self._gpus.changed_since(seen, HEALTH_POLL_S)
            if generation == seen:
                continue
            seen = generation
            changed = [r for r in self._gpus.health() if last.get(r.device) != r]
            last.update((r.device, r) for r in changed)
            if changed:
                yield changed

    def registration(self, status: RegistrationStatus) -> None:
        self.registered = status
        if status.registered:
            log.info("the kubelet registered DRA driver %s", self._driver)
        else:
            log.error("the kubelet refused DRA driver %s: %s", self._driver, status.error)
