"""A GPU as a node reports it, and how much of it is in use."""

from dataclasses import dataclass

from vgpu.domain.mig.profiles import MigProfile

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


@dataclass(frozen=True, slots=True, repr=False)
class Usage:
    """What is taken of one card: slices (containers), memory MiB, core percent, and on a card
    in MIG mode the memory slices its instances occupy (`mig`, bit i = slice i).

    Adding claims joins their slices and subtracting frees them; whether two claims share a
    slice is `collides`, which a sum cannot tell.
    """

    slices: int = 0
    memory: int = 0
    cores: int = 0
    mig: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            self.slices + other.slices,
            self.memory + other.memory,
            self.cores + other.cores,
            self.mig | other.mig,
        )

    def __sub__(self, other: "Usage") -> "Usage":
        return Usage(
            max(0, self.slices - other.slices),
            max(0, self.memory - other.memory),
            max(0, self.cores - other.cores),
            self.mig & ~other.mig,
        )

    def union(self, other: "Usage") -> "Usage":
        """Component-wise maximum: the larger of two claims that never run at the same time
        (MIG slices are joined: an instance lives as long as its pod)."""
        return Usage(
            max(self.slices, other.slices),
            max(self.memory, other.memory),
            max(self.cores, other.cores),
            self.mig | other.mig,
        )

    def collides(self, other: "Usage") -> bool:
        """Whether the two claims want a MIG memory slice in common."""
        return bool(self.mig & other.mig)

    def fits_in(self, device: Device) -> bool:
        """Within the card's slices, memory and cores. On a MIG card only the slices count: its
        instances charge their profiles' memory and cores, which the device plugin reports
        apart from the card's (each core share is rounded up, so seven 1g instances add up to
        105 %); the placements (`collides`) are what bound them, as in HAMi."""
        if device.mode == MIG_MODE:
            return self.slices <= device.count
        return (
            self.slices <= device.count
            and self.memory <= device.memory
            and self.cores <= device.cores
        )

    @property
    def is_idle(self) -> bool:
        """Whether nothing is taken."""
        return self.slices == 0 and self.memory == 0 and self.cores == 0 and self.mig == 0

    def __repr__(self) -> str:
        mig = f", mig={bin(self.mig)}" if self.mig else ""
        return f"Usage(slices={self.slices}, memory={self.memory}, cores={self.cores}{mig})"


IDLE = Usage()
