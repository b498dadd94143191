"""What a container's region says per device: the numbers behind the per-container metrics.

Rules of HAMi's monitor: a device slot counts when its UUID is not empty; the UUID shown is its
first 40 bytes (`GPU-` + 36 characters); memory and utilisation are summed over the process
slots whose status is not 0.
"""

from dataclasses import dataclass

from vgpu.ports.accounting import Region

UUID_SHOWN = 40


@dataclass(frozen=True, slots=True)
class ProcessFigures:
    """One live process that uses a device: memory in bytes, SM utilisation in percent."""

    pid: int
    host_pid: int
    memory: int
    sm: int


@dataclass(frozen=True, slots=True)
class DeviceFigures:
    """One device slot of a container. Memory in bytes, utilisation in percent."""

    index: int
    uuid: str
    limit: int
    used: int
    context: int
    module: int
    data: int
    utilization: int
    processes: tuple[ProcessFigures, ...]

    @property
    def other(self) -> int:
        """Memory counted in `used` but in none of the three kinds (HAMi's legacy `offset`)."""
        return self.used - self.context - self.module - self.data


def device_figures(region: Region) -> list[DeviceFigures]:
    live = [slot for slot in region.processes if slot.live]
    found = []
    for i in range(region.device_count):
        uuid = region.uuids[i][:UUID_SHOWN]
        if not uuid:
            continue
        memory = [slot.memory[i] for slot in live]
        found.append(
            DeviceFigures(
                index=i,
                uuid=uuid,
                limit=region.limits[i],
                used=sum(m.total for m in memory),
                context=sum(m.context for m in memory),
                module=sum(m.module for m in memory),
                data=sum(m.data for m in memory),
                utilization=sum(slot.utilization[i].sm for slot in live),
                processes=tuple(
                    ProcessFigures(
                        slot.pid, slot.host_pid, slot.memory[i].total, slot.utilization[i].sm
                    )
                    for slot in live
                    if slot.memory[i].total or slot.utilization[i].sm
                ),
            )
        )
    return found


def last_kernel_age(region: Region, now: float) -> float | None:
    """Seconds since the container's last kernel launch (never negative); None if unknown."""
    if region.last_kernel_time <= 0:
        return None
    return max(now - region.last_kernel_time, 0.0)
