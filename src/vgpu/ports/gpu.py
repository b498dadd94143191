"""The node's GPUs as the device plugin needs them."""

from dataclasses import dataclass
from typing import Protocol

from vgpu.domain.inventory import GpuInfo, HealthEvent


class GpuUnavailable(RuntimeError):
    """No driver, no GPU, or the library failed; the message says which and what to do."""


@dataclass(frozen=True, slots=True)
class GpuUsage:
    """What a GPU is doing now, as the driver reports it; None where the GPU cannot say."""

    uuid: str
    index: int
    name: str  # NVML model name
    memory_used_bytes: int | None
    utilization_percent: int | None  # NVML utilization.gpu, 0-100
    memory_controller_percent: int | None  # NVML utilization.memory, 0-100


class GpuPort(Protocol):
    def discover(self) -> list[GpuInfo]:
        """Every GPU on the node; raises GpuUnavailable with a clear message."""
        ...

    def wait_for_health_events(self, timeout_s: float) -> list[HealthEvent]:
        """Block up to `timeout_s` for health changes; an empty list means none happened."""
        ...

    def read_usage(self) -> list[GpuUsage]:
        """Every GPU's used memory and utilisation now; raises GpuUnavailable."""
        ...

    def close(self) -> None: ...
