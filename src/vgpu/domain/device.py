"""A GPU as a node reports it, and how much of it is in use."""

from dataclasses import dataclass

from vgpu.domain.mig import MigProfile

HAMI_CORE_MODE = "hami-core"
MIG_MODE = "mig"


@dataclass(frozen=True, slots=True)
class Device:
    """One physical GPU as registered by the device plugin.

    `memory` is MiB after memory scaling, `cores` is 100 x core scaling, `count` is the split
    count: how many containers may share the card at once.
    """

    uuid: str
    index: int
    type: str
    count: int
    memory: int
    cores: int = 100
    numa: int = 0
    healthy: bool = True
    mode: str = HAMI_CORE_MODE
    mig_profiles: tuple[MigProfile, ...] = ()  # `migProfiles`, MIG mode only (HAMi v2.10)


@dataclass(frozen=True, slots=True)
class Usage:
    """What is taken of one card: slices (containers), memory MiB, core percent."""

    slices: int = 0
    memory: int = 0
    cores: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            self.slices + other.slices, self.memory + other.memory, self.cores + other.cores
        )

    def __sub__(self, other: "Usage") -> "Usage":
        return Usage(
            max(0, self.slices - other.slices),
            max(0, self.memory - other.memory),
            max(0, self.cores - other.cores),
        )

    def union(self, other: "Usage") -> "Usage":
        """Component-wise maximum: the larger of two claims that never run at the same time."""
        return Usage(
            max(self.slices, other.slices),
            max(self.memory, other.memory),
            max(self.cores, other.cores),
        )

    def fits_in(self, device: Device) -> bool:
        return (
            self.slices <= device.count
            and self.memory <= device.memory
            and self.cores <= device.cores
        )

    @property
    def is_idle(self) -> bool:
        return self.slices == 0 and self.memory == 0 and self.cores == 0


IDLE = Usage()
