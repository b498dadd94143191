"""Which MIG instance a request gets on a card in MIG mode (HAMi v2.10's rule,
docs/protocol.md#mig-instance-choice).

The smallest profile that holds the request's memory (ties: fewer slices) with a free
placement, tried in `geometry.placement_order`.

>>> one = MigProfile("1g.10gb", 1, 9856, 15, tuple(MigPlacement(i, 1) for i in range(7)))
>>> two = MigProfile("2g.20gb", 2, 19968, 29, tuple(MigPlacement(i, 2) for i in (0, 2, 4)))
>>> card = Device("GPU-a", 0, "A100", 7, 81920, mode="mig", mig_profiles=(two, one))
>>> mig_choice(ContainerRequest(1, memory=9000), card)
MigSlot(profile='1g.10gb', placement=MigPlacement(start=6, size=1))
>>> mig_choice(ContainerRequest(1, memory=12000), card, Usage(1, 9856, 15, mig=0b11))
MigSlot(profile='2g.20gb', placement=MigPlacement(start=2, size=2))
>>> mig_choice(ContainerRequest(1, memory=30000), card) is None
True
"""

from vgpu.domain.device import IDLE, Device, Usage
from vgpu.domain.mig.geometry import placement_order
from vgpu.domain.mig.profiles import MigPlacement, MigProfile, MigSlot
from vgpu.domain.request import ContainerRequest


def mig_choice(request: ContainerRequest, device: Device, usage: Usage = IDLE) -> MigSlot | None:
    """The profile and placement one slice of `request` would get on `device` as used by
    `usage`; None when none is free (the card's rejection is CardMigTopologyInfeasible).
    Percentage requests resolve against the card's memory."""
    chosen = pick_mig_slot(device, request.memory_on(device), usage.mig)
    return None if chosen is None else chosen[1]


def pick_mig_slot(device: Device, memory: int, occupied: int) -> tuple[MigProfile, MigSlot] | None:
    """The profile (for the memory and cores a grant charges) and slot for `memory` MiB on
    `device`, whose occupied slices are the bits of `occupied`."""
    profiles = sorted(device.mig_profiles, key=lambda p: (p.memory_mib, p.slices))
    for profile in profiles:
        if profile.memory_mib < memory:
            continue
        placement = _free_placement(profile, occupied)
        if placement is not None:
            return profile, MigSlot(profile.name, placement)
    return None


def _free_placement(profile: MigProfile, occupied: int) -> MigPlacement | None:
    for placement in placement_order(profile):
        if placement.fits_mask and not placement.mask & occupied:
            return placement
    return None
