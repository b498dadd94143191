"""MIG: the GPU instance profiles a card offers, where they can sit, and the instances made.

A MIG-capable GPU is cut into memory slices; a GPU instance of a profile occupies
`[start, start + size)` of them at one of the profile's possible placements, and two instances
may not overlap (docs/protocol.md#mig).

>>> MigPlacement(0, 4).overlaps(MigPlacement(2, 2)), MigPlacement(0, 4).overlaps(MigPlacement(4, 4))
(True, False)

The scheduler keeps a card's occupied slices as a bitmask, bit `i` for slice `i`:

>>> bin(MigPlacement(2, 2).mask)
'0b1100'
"""

from dataclasses import dataclass

MAX_MIG_SLICES = 64  # a bound on hostile numbers: NVIDIA's GPUs have 8 memory slices


@dataclass(frozen=True, slots=True)
class MigPlacement:
    """Where a MIG instance sits on its GPU: `size` memory slices from slice `start`."""

    start: int
    size: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.size < 1:
            raise ValueError(
                f"placement start={self.start} size={self.size}: need start >= 0, size >= 1"
            )

    def overlaps(self, other: "MigPlacement") -> bool:
        """Whether the two placements share a slice."""
        return self.start < other.start + other.size and other.start < self.start + self.size

    @property
    def fits_mask(self) -> bool:
        """Whether the slices lie within the first MAX_MIG_SLICES (real GPUs have 8)."""
        return self.start + self.size <= MAX_MIG_SLICES

    @property
    def mask(self) -> int:
        """The occupied slices as bits; ValueError past MAX_MIG_SLICES, where no GPU has any."""
        if not self.fits_mask:
            raise ValueError(
                f"placement start={self.start} size={self.size} ends past slice {MAX_MIG_SLICES}"
            )
        return ((1 << self.size) - 1) << self.start


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU instance profile, as `migProfiles` in the register annotation lists it.

    `name` follows NVIDIA's `<slices>g.<GiB>gb` spelling; `core` is its share of the GPU's
    multiprocessors in percent, rounded up against the largest profile. `instances` (how many
    fit on an empty GPU) and `multiprocessors` come from NVML and are not published.
    """

    name: str
    slices: int
    memory_mib: int
    core: int
    placements: tuple[MigPlacement, ...]
    instances: int = 1
    multiprocessors: int = 0


@dataclass(frozen=True, slots=True)
class MigCapability:
    """Whether a GPU can do MIG, whether it is on (or waiting for a reset to change), and its
    profiles while it is on."""

    supported: bool
    enabled: bool = False
    pending: bool = False
    profiles: tuple[MigProfile, ...] = ()


@dataclass(frozen=True, slots=True)
class MigInstance:
    """A GPU instance with its one compute instance, as HAMi's runtime fields name it."""

    gpu_uuid: str
    profile: str
    placement: MigPlacement
    mig_uuid: str
    gpu_instance_id: int
    compute_instance_id: int = 0


@dataclass(frozen=True, slots=True)
class MigSlot:
    """The MIG instance a grant stands for: a GPU instance profile at one placement."""

    profile: str
    placement: MigPlacement

    @property
    def mask(self) -> int:
        """The slices the instance occupies, as bits (`MigPlacement.mask`)."""
        return self.placement.mask
