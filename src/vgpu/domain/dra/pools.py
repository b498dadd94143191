"""The resource pools a node can draw devices from, as kube-scheduler gathers them
(`pools.go`): the slices published for the node (`nodeName`) or for every node (`allNodes`),
grouped by driver and pool, keeping only the pool's newest generation.

A pool with fewer slices than `resourceSliceCount` is being updated (incomplete); one that
names a device twice is invalid. Neither gives devices; a request for `All` devices fails
outright while one is, as it cannot know what "all" is.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from vgpu.domain.dra.model import ResourceSlice


@dataclass(frozen=True, slots=True)
class Pool:
    """One driver's pool on a node: its slices of the newest generation, and whether it can
    be used (`incomplete`; `invalid` says why not, empty when it can)."""

    driver: str
    name: str
    slices: tuple[ResourceSlice, ...]
    incomplete: bool = False
    invalid: str = ""

    @property
    def label(self) -> str:
        """`driver/pool`, as kube-scheduler names a pool in its messages."""
        return f"{self.driver}/{self.name}"

    @property
    def usable(self) -> bool:
        return not self.incomplete and not self.invalid


def node_pools(slices: Iterable[ResourceSlice], node: str) -> list[Pool]:
    """The pools whose slices target `node`, ordered by driver and pool name."""
    newest: dict[tuple[str, str], list[ResourceSlice]] = {}
    for slice_ in slices:
        if slice_.node_name != node and not slice_.all_nodes:
            continue
        key = (slice_.driver, slice_.pool.name)
        kept = newest.setdefault(key, [])
        if kept and kept[0].pool.generation > slice_.pool.generation:
            continue
        if kept and kept[0].pool.generation < slice_.pool.generation:
            kept.clear()
        kept.append(slice_)
    pools = []
    for (driver, name), kept in sorted(newest.items()):
        expected = max(s.pool.resource_slice_count for s in kept)
        pools.append(Pool(driver, name, tuple(kept), len(kept) < expected, _duplicate(kept)))
    return pools


def _duplicate(slices: list[ResourceSlice]) -> str:
    seen: set[str] = set()
    for slice_ in slices:
        for device in slice_.devices:
            if device.name in seen:
                return f"device {device.name} is listed twice"
            seen.add(device.name)
    return ""
