"""The node's GPUs as the device plugin needs them."""

from typing import Protocol

from vgpu.domain.inventory import GpuInfo, HealthEvent


class GpuUnavailable(RuntimeError):
    """No driver, no GPU, or the library failed; the message says which and what to do."""


class GpuPort(Protocol):
    def discover(self) -> list[GpuInfo]:
        """Every GPU on the node; raises GpuUnavailable with a clear message."""
        ...

    def wait_for_health_events(self, timeout_s: float) -> list[HealthEvent]:
        """Block up to `timeout_s` for health changes; an empty list means none happened."""
        ...

    def close(self) -> None: ...
