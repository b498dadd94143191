"""The node's GPUs as the DRA driver publishes them, with their health.

Every GPU NVML (or the fake) lists is a device `gpu-<index>`, except those in MIG mode (HAMi-core
does not limit MIG instances; they are left to a MIG-aware driver, and logged). A GPU that turns
unhealthy (an XID the watcher counts, or gone) leaves the published slice until it is healthy
again, and a claim on it is not prepared; its health is streamed to the kubelet either way.
Every change bumps `generation` and wakes the waiters (the slice publisher, health streams).
"""

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from vgpu.domain.dra import Device, GpuCard, gpu_device_name, node_device
from vgpu.domain.inventory import GpuInfo, HealthEvent
from vgpu.ports.dra import DeviceHealthReport
from vgpu.ports.gpu import GpuDetails, GpuDetailsPort, GpuPort, GpuUnavailable

log = logging.getLogger(__name__)


class DraGpus:
    """Thread-safe: health events come from one thread, Prepare calls and streams from others."""

    def __init__(
        self,
        node: str,
        gpus: Sequence[GpuInfo],
        details: Mapping[str, GpuDetails] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._node = node
        self._details = dict(details or {})
        self._clock = clock
        self._gpus = {gpu_device_name(g.index): g for g in sorted(gpus, key=lambda g: g.index)}
        self._by_uuid = {g.uuid: name for name, g in self._gpus.items()}
        started = int(clock())
        self._health: dict[str, tuple[bool, str, int]] = {
            name: (True, "", started) for name in self._gpus
        }
        self._generation = 0
        self._changed = threading.Condition()

    @property
    def node(self) -> str:
        return self._node

    @property
    def generation(self) -> int:
        with self._changed:
            return self._generation

    def cards(self) -> dict[str, GpuCard]:
        """Every GPU served, healthy or not, by device name."""
        return {name: _card(gpu, self._details.get(gpu.uuid)) for name, gpu in self._gpus.items()}

    def devices(self) -> list[Device]:
        """The healthy GPUs' devices, in index order: what the slice lists."""
        with self._changed:
            healthy = [name for name, (ok, _, _) in self._health.items() if ok]
        devices = []
        for name in healthy:
            gpu = self._gpus[name]
            details = self._details.get(gpu.uuid) or GpuDetails()
            devices.append(
                node_device(_card(gpu, details), details.pci_bus_id, details.cuda_driver_version)
            )
        return devices

    def problem(self, device: str) -> str | None:
        """Why the GPU of `device` must not be handed out now; None when it is healthy."""
        with self._changed:
            healthy, reason, _ = self._health.get(device, (True, "", 0))
        if healthy:
            return None
        return f"GPU {device} ({self._gpus[device].uuid}) is unhealthy: {reason or 'no reason'}"

    def health(self, devices: Iterable[str] | None = None) -> list[DeviceHealthReport]:
        """The health of `devices` (every GPU when None), for the kubelet."""
        with self._changed:
            names = list(self._health) if devices is None else list(devices)
            return [
                DeviceHealthReport(self._node, name, ok, at, reason)
                for name in names
                for ok, reason, at in [self._health[name]]
            ]

    def apply(self, events: Iterable[HealthEvent]) -> bool:
        """Record health changes (HealthSink); True when anything changed."""
        changed = []
        now = int(self._clock())
        with self._changed:
            for event in events:
                name = self._by_uuid.get(event.uuid)
                if name is None:
                    log.info("health event for %s ignored: not a GPU served here", event.uuid)
                    continue
                if self._health[name][0] != event.healthy:
                    self._health[name] = (event.healthy, "" if event.healthy else event.reason, now)
                    changed.append((name, event))
            if changed:
                self._generation += 1
                self._changed.notify_all()
        for name, event in changed:
            state = "healthy" if event.healthy else "unhealthy"
            reason = f": {event.reason}" if event.reason else ""
            log.warning("GPU %s (%s) is now %s%s", name, event.uuid, state, reason)
        return bool(changed)

    def changed_since(
        self, seen: int, timeout_s: float, until: Callable[[], bool] = lambda: False
    ) -> int:
        """Block until the generation differs from `seen`, `until()` holds after a `wake`, or
        the timeout passes; the generation."""
        with self._changed:
            self._changed.wait_for(lambda: self._generation != seen or until(), timeout_s)
            return self._generation

    def wake(self) -> None:
        """Wake every waiter (to notice a stop)."""
        with self._changed:
            self._changed.notify_all()


def discover_gpus(port: GpuPort, node: str) -> DraGpus:
    """The GPUs this driver serves, each logged; MIG GPUs left out with the reason."""
    served = []
    for gpu in port.discover():
        if gpu.mig_enabled:
            log.warning(
                "GPU %d %s: MIG mode is on; not published (HAMi-core does not limit MIG "
                "instances)",
                gpu.index,
                gpu.uuid,
            )
            continue
        log.info("GPU %d %s: %s, %d MiB, NUMA %d", gpu.index, gpu.uuid, gpu.name,
                 gpu.memory_mib, gpu.numa)
        served.append(gpu)
    details: dict[str, GpuDetails] = {}
    if isinstance(port, GpuDetailsPort):
        try:
            details = port.gpu_details()
        except GpuUnavailable as exc:
            log.warning("GPU details not readable (%s): their attributes are not published", exc)
    return DraGpus(node, served, details)


def _card(gpu: GpuInfo, details: GpuDetails | None) -> GpuCard:
    details = details or GpuDetails()
    return GpuCard(
        uuid=gpu.uuid,
        index=gpu.index,
        product_name=gpu.name,
        memory_mib=gpu.memory_mib,
        numa_node=max(gpu.numa, 0),
        architecture=details.architecture,
        driver_version=details.driver_version,
    )
