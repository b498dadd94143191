"""A pod's MIG grants to and from `hami.io/vgpu-mig-allocations` (docs/protocol.md#mig-allocations).

`hami.io/vgpu-devices-allocated` names the parent card of each MIG device; the reservations say
which instance (profile, placement) each one is, by container (init containers first) and by
position in that container's list. The scheduler writes both in one patch and reads both back
after a restart, so that the slices a pod's instances occupy stay counted.

>>> from vgpu.domain.mig import MigPlacement
>>> slot = MigSlot("2g.20gb", MigPlacement(2, 2))
>>> grants = ((), (DeviceGrant("GPU-a", "NVIDIA", 19968, 29, slot),))
>>> (reservation,) = mig_reservations(grants)
>>> reservation.container_index, reservation.device_index, reservation.profile
(1, 0, '2g.20gb')
>>> plain = ((), (DeviceGrant("GPU-a", "NVIDIA", 19968, 29),))
>>> with_mig_reservations(plain, (reservation,)) == grants
True

A container given two instances on one card names the card twice; the device list reads so
only with the reservations that tell the two apart:

>>> two = (tuple(DeviceGrant("GPU-a", "NVIDIA", 9856, 15, MigSlot("1g.10gb", MigPlacement(s, 1)))
...        for s in (6, 5)),)
>>> decode_granted("GPU-a,NVIDIA,9856,15:GPU-a,NVIDIA,9856,15:;", mig_reservations(two)) == two
True
"""

from collections.abc import Sequence
from dataclasses import replace

from vgpu.domain.codec import GRANTS, decode_pod_grants
from vgpu.domain.errors import CodecError
from vgpu.domain.grant import DeviceGrant, PodGrants
from vgpu.domain.mig.allocations import MIG_ALLOCATIONS_ANNOTATION, MigReservation
from vgpu.domain.mig.profiles import MigSlot


def mig_reservations(grants: PodGrants) -> tuple[MigReservation, ...]:
    """One reservation per MIG grant, in container then device order."""
    return tuple(
        MigReservation(container, device, grant.uuid, grant.mig.profile, grant.mig.placement)
        for container, granted in enumerate(grants)
        for device, grant in enumerate(granted)
        if grant.mig is not None
    )


def decode_granted(
    allocated: str, reservations: Sequence[MigReservation], annotation: str = GRANTS
) -> PodGrants:
    """The grants of the device list `allocated` with the instances `reservations` reserve
    attached: what the scheduler counts for a pod it reads back. A card named twice in one
    container reads only as MIG devices with placements of their own (codec.decode_pod_grants).
    CodecError when either annotation is malformed or they disagree."""
    grants = decode_pod_grants(allocated, annotation, reservations)
    return with_mig_reservations(grants, reservations)


def with_mig_reservations(grants: PodGrants, reservations: Sequence[MigReservation]) -> PodGrants:
    """`grants` (decoded from the device lists) with each reservation's instance attached.

    CodecError when a reservation names a container or device the lists do not have, another
    card than the grant at that position, slices no GPU has, or slices another reservation of
    the pod has: the annotations disagree, so neither can be believed.
    """
    if not reservations:
        return grants
    attached = [list(container) for container in grants]
    taken: dict[str, int] = {}  # card -> slices reserved by the entries before
    for position, reservation in enumerate(reservations):
        where = f"entry #{position}"
        container, device = reservation.key
        if container >= len(attached) or device >= len(attached[container]):
            raise CodecError(
                MIG_ALLOCATIONS_ANNOTATION,
                where,
                f"container {container} device {device} has no grant in the device list",
            )
        grant: DeviceGrant = attached[container][device]
        if grant.uuid != reservation.gpu_uuid:
            raise CodecError(
                MIG_ALLOCATIONS_ANNOTATION,
                where,
                f"gpuUUID {reservation.gpu_uuid} is not the granted card {grant.uuid}",
            )
        if not reservation.placement.fits_mask:
            raise CodecError(
                MIG_ALLOCATIONS_ANNOTATION,
                where,
                f"placement {reservation.placement} is past any GPU",
            )
        slot = MigSlot(reservation.profile, reservation.placement)
        if taken.get(grant.uuid, 0) & slot.mask:
            raise CodecError(
                MIG_ALLOCATIONS_ANNOTATION,
                where,
                f"placement {reservation.placement} overlaps another instance of the pod",
            )
        taken[grant.uuid] = taken.get(grant.uuid, 0) | slot.mask
        attached[container][device] = replace(grant, mig=slot)
    return tuple(tuple(container) for container in attached)
