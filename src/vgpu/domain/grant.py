"""The concrete slices a pod was given: per container, a list of (card, memory, cores)."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from vgpu.domain.device import Usage
from vgpu.domain.mig.profiles import MigSlot


@dataclass(frozen=True, slots=True)
class DeviceGrant:
    """One slice of one card for one container; on a card in MIG mode, the MIG instance
    (profile and placement) the slice is, whose memory and cores are the profile's."""

    uuid: str
    vendor: str
    memory: int
    cores: int
    mig: MigSlot | None = None

    @property
    def usage(self) -> Usage:
        """What the grant takes of its card: one slice, its memory and cores, and the memory
        slices of its MIG instance."""
        if self.mig is None:
            return Usage(1, self.memory, self.cores)
        return Usage(1, self.memory, self.cores, self.mig.mask)


ContainerGrant = tuple[DeviceGrant, ...]
PodGrants = tuple[ContainerGrant, ...]
"""A pod's grants: per container, init containers first, the cards it was given (a container
without a GPU has none); `hami.io/vgpu-devices-allocated` encodes it."""


def pod_footprint(grants: PodGrants, init_count: int) -> dict[str, Usage]:
    """What a pod holds on each card at its peak: what the ledger and the quota count for a
    placed pod whose init containers have not all finished (`pod_hold` tells the rest).

    Init containers run one after another and before the app containers, so the pod needs, per
    card, the larger of any single init container's claim and the app containers' sum.
    (HAMi adds them all up and so reserves capacity that is never used at the same time.)
    A MIG instance is different: the device plugin keeps it until the pod ends, so an init
    container's MIG grants are held beside the app containers' for the pod's whole life.

    >>> init = (DeviceGrant("GPU-a", "NVIDIA", 8000, 50),)
    >>> app = (DeviceGrant("GPU-a", "NVIDIA", 2000, 10), DeviceGrant("GPU-a", "NVIDIA", 3000, 20))
    >>> pod_footprint((init, app), init_count=1)  # the larger of 8000 and 2000 + 3000 MiB
    {'GPU-a': Usage(slices=2, memory=8000, cores=50)}
    """
    app: dict[str, Usage] = _sum_usage(g for c in grants[init_count:] for g in c)
    if not init_count:
        return app
    footprint = _sum_usage(g for c in grants[:init_count] for g in held_for_life(c))
    for uuid, usage in app.items():
        footprint[uuid] = footprint.get(uuid, Usage()) + usage
    for init_container in grants[:init_count]:
        for uuid, usage in _sum_usage(held_while_running(init_container)).items():
            footprint[uuid] = footprint.get(uuid, Usage()).union(usage)
    return footprint


def overlapping_instances(grants: PodGrants) -> str | None:
    """Where two of the pod's MIG instances would share a slice of a card, or None. All of a
    pod's instances live as long as the pod, so even those of different containers may not.

    >>> from vgpu.domain.mig import MigPlacement
    >>> def on_a(start: int, size: int) -> DeviceGrant:
    ...     return DeviceGrant("GPU-a", "NVIDIA", 0, 0, MigSlot("x", MigPlacement(start, size)))
    >>> overlapping_instances(((on_a(0, 2), on_a(2, 2)),)) is None
    True
    >>> overlapping_instances(((on_a(0, 2),), (on_a(1, 1),)))
    'card GPU-a: container #1, device #0 would share MIG slices 0b10 with another instance'
    """
    taken: dict[str, int] = {}
    for container, granted in enumerate(grants):
        for device, grant in enumerate(granted):
            if grant.mig is None:
                continue
            held, mask = taken.get(grant.uuid, 0), grant.mig.mask
            if held & mask:
                return (
                    f"card {grant.uuid}: container #{container}, device #{device} would share "
                    f"MIG slices {bin(held & mask)} with another instance"
                )
            taken[grant.uuid] = held | mask
    return None


def held_for_life(container: ContainerGrant) -> ContainerGrant:
    """The container's MIG grants: their instances last until the pod ends."""
    return tuple(g for g in container if g.mig is not None)


def held_while_running(container: ContainerGrant) -> ContainerGrant:
    """The container's shared (non-MIG) grants: free again once it has finished."""
    return tuple(g for g in container if g.mig is None)


def _sum_usage(grants: Iterable[DeviceGrant]) -> dict[str, Usage]:
    total: dict[str, Usage] = {}
    for grant in grants:
        total[grant.uuid] = total.get(grant.uuid, Usage()) + grant.usage
    return total


def granted_uuids(grants: Sequence[ContainerGrant]) -> list[str]:
    """Every card named in the grants, first appearance first, without repeats."""
    return list(dict.fromkeys(g.uuid for container in grants for g in container))
