"""The concrete slices a pod was given: per container, a list of (card, memory, cores)."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from vgpu.domain.device import Usage


@dataclass(frozen=True, slots=True)
class DeviceGrant:
    """One slice of one card for one container."""

    uuid: str
    vendor: str
    memory: int
    cores: int

    @property
    def usage(self) -> Usage:
        return Usage(slices=1, memory=self.memory, cores=self.cores)


ContainerGrant = tuple[DeviceGrant, ...]
PodGrants = tuple[ContainerGrant, ...]


def pod_footprint(grants: PodGrants, init_count: int) -> dict[str, Usage]:
    """What a pod holds on each card at its peak.

    Init containers run one after another and before the app containers, so the pod needs, per
    card, the larger of any single init container's claim and the app containers' sum.
    (HAMi adds them all up and so reserves capacity that is never used at the same time.)
    """
    app: dict[str, Usage] = _sum_usage(g for c in grants[init_count:] for g in c)
    if not init_count:
        return app
    footprint = dict(app)
    for init_container in grants[:init_count]:
        for uuid, usage in _sum_usage(init_container).items():
            footprint[uuid] = footprint.get(uuid, Usage()).union(usage)
    return footprint


def _sum_usage(grants: Iterable[DeviceGrant]) -> dict[str, Usage]:
    total: dict[str, Usage] = {}
    for grant in grants:
        total[grant.uuid] = total.get(grant.uuid, Usage()) + grant.usage
    return total


def granted_uuids(grants: Sequence[ContainerGrant]) -> list[str]:
    """Every card named in the grants, first appearance first, without repeats."""
    return list(dict.fromkeys(g.uuid for container in grants for g in container))
