"""From the GPUs a node has to the cards it registers: split count and scaling applied."""

from dataclasses import dataclass

from vgpu.domain.device import HAMI_CORE_MODE, MIG_MODE, Device
from vgpu.domain.mig.profiles import MigProfile


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """A physical GPU as the driver (NVML) reports it, before any sharing rule."""

    uuid: str
    index: int
    name: str  # NVML model name, e.g. "NVIDIA A100-SXM4-80GB" or "Tesla V100-PCIE-32GB"
    memory_mib: int
    numa: int = 0  # the GPU's NUMA node; -1 when unknown (sysfs's value for none)
    mig_enabled: bool = False


@dataclass(frozen=True, slots=True)
class HealthEvent:
    """A change of a GPU's health (an XID error, or the GPU vanished)."""

    uuid: str
    healthy: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SharingConfig:
    """HAMi's per-node sharing settings (chart defaults)."""

    split_count: int = 10  # deviceSplitCount
    memory_scaling: float = 1.0  # deviceMemoryScaling
    core_scaling: float = 1.0  # deviceCoreScaling

    def __post_init__(self) -> None:
        if self.split_count < 1:
            raise ValueError(f"split_count={self.split_count} must be at least 1")
        if self.memory_scaling <= 0:
            raise ValueError(f"memory_scaling={self.memory_scaling} must be positive")
        if self.core_scaling <= 0:
            raise ValueError(f"core_scaling={self.core_scaling} must be positive")


def register_device(
    gpu: GpuInfo,
    sharing: SharingConfig,
    healthy: bool = True,
    mig_profiles: tuple[MigProfile, ...] = (),
) -> Device:
    """The card as `hami.io/node-nvidia-register` lists it.

    The type gets HAMi's `NVIDIA-` prefix unless the name already starts with `NVIDIA`. A card
    in MIG mode is neither memory- nor core-scaled, publishes its `mig_profiles`, and its count
    is the most instances any one of them fits (HAMi v2.10,
    docs/protocol.md#mig-register-annotation).
    """
    name = gpu.name if gpu.name.upper().startswith("NVIDIA") else f"NVIDIA-{gpu.name}"
    if gpu.mig_enabled:
        memory, cores = gpu.memory_mib, 100
        count = max((p.instances for p in mig_profiles), default=sharing.split_count)
    else:
        memory = int(gpu.memory_mib * sharing.memory_scaling)
        cores = int(100 * sharing.core_scaling)
        count, mig_profiles = sharing.split_count, ()
    return Device(
        uuid=gpu.uuid,
        index=gpu.index,
        type=name,
        count=count,
        memory=memory,
        cores=cores,
        numa=max(gpu.numa, 0),
        healthy=healthy,
        mode=MIG_MODE if gpu.mig_enabled else HAMI_CORE_MODE,
        mig_profiles=mig_profiles,
    )
