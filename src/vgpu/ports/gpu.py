"""The node's GPUs as the device plugin needs them."""

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from vgpu.domain.inventory import GpuInfo, HealthEvent
from vgpu.domain.mig import MigInstance, MigPlacement, MigProfile
from vgpu.domain.topology import GpuLink


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


@dataclass(frozen=True, slots=True)
class GpuDetails:
    """What a DRA driver publishes of a GPU beyond `GpuInfo`; "" where it is not known.

    `pci_bus_id` is in the kernel's form (`0000:3b:00.0`: lower case, 4-digit domain), the
    versions as the driver reports them (`550.54.15`, CUDA `12.4`), `architecture` by name
    (`Ampere`)."""

    architecture: str = ""
    pci_bus_id: str = ""
    driver_version: str = ""
    cuda_driver_version: str = ""


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

    def read_topology(self) -> list[GpuLink]:
        """For every ordered pair of GPUs, the PCIe path and NVLinks from the first to the
        second (docs/protocol.md#pair-scores); raises GpuUnavailable when any of it cannot be read,
        as HAMi then publishes no scores at all."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class GpuDetailsPort(Protocol):
    """A GPU port that can also describe the GPUs for DRA's device attributes."""

    def gpu_details(self) -> dict[str, GpuDetails]:
        """By uuid, each discovered GPU's details; raises GpuUnavailable."""
        ...


class MigError(RuntimeError):
    """A MIG instance cannot be made or removed; the message names the GPU, profile and why."""


@runtime_checkable
class MigPort(Protocol):
    """MIG instances on the node's GPUs (docs/protocol.md#mig-instance-lifecycle): what the device
    plugin creates on Allocate and destroys when the pod goes."""

    def mig_profiles(self) -> dict[str, tuple[MigProfile, ...]]:
        """The GPU instance profiles of every GPU whose MIG mode is on, by GPU uuid."""
        ...

    def mig_instances(self) -> list[MigInstance]:
        """Every MIG instance that exists now."""
        ...

    def create_mig_instance(
        self, gpu_uuid: str, profile: str, placement: MigPlacement
    ) -> MigInstance:
        """A GPU instance of `profile` at `placement` with one compute instance; MigError when
        the GPU is not in MIG mode, the profile or placement is not offered, or the slices are
        taken."""
        ...

    def destroy_mig_instance(self, instance: MigInstance) -> None:
        """Remove the instance; one already gone is not an error."""
        ...
