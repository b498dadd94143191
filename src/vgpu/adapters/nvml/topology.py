"""How the node's GPUs are connected, read from NVML the way HAMi reads it
(docs/protocol.md#pair-scores).

For each ordered pair (i, j): the closest common PCIe ancestor, and the NVLinks of i that reach
j. An NVLink reaches j when its remote PCI bus id is j's; when none does but i has enabled
links, and both GPUs have links into NVSwitches, the pair counts the smaller number of switch
links (an NVSwitch system connects every GPU to every other).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from vgpu.adapters.nvml.library import text
from vgpu.domain.topology import GpuLink, PcieLink

_LEVELS = {
    "NVML_TOPOLOGY_INTERNAL": PcieLink.SAME_BOARD,
    "NVML_TOPOLOGY_SINGLE": PcieLink.SINGLE_SWITCH,
    "NVML_TOPOLOGY_MULTIPLE": PcieLink.MULTI_SWITCH,
    "NVML_TOPOLOGY_HOSTBRIDGE": PcieLink.HOST_BRIDGE,
    "NVML_TOPOLOGY_NODE": PcieLink.SAME_CPU,
    "NVML_TOPOLOGY_SYSTEM": PcieLink.CROSS_CPU,
}


class TopologyError(RuntimeError):
    """A link could not be read or has an unknown level; HAMi then publishes no scores."""


@dataclass(frozen=True, slots=True)
class _NvLinks:
    """One GPU's enabled NVLinks: the bus ids they lead to, and how many go into NVSwitches."""

    remote_buses: tuple[str, ...]
    switch_links: int


def read_links(nvml: ModuleType, gpus: Sequence[tuple[str, Any]]) -> list[GpuLink]:
    """Links for every ordered pair of `gpus` (uuid, NVML handle); TopologyError on failure."""
    try:
        buses = [_bus(nvml.nvmlDeviceGetPciInfo(handle).busId) for _, handle in gpus]
        nvlinks = [_nvlinks(nvml, handle) for _, handle in gpus]
        levels = {getattr(nvml, name): link for name, link in _LEVELS.items()}
        links = []
        for i, (source, handle) in enumerate(gpus):
            for j, (target, other) in enumerate(gpus):
                if i == j:
                    continue
                level = nvml.nvmlDeviceGetTopologyCommonAncestor(handle, other)
                if level not in levels:
                    raise TopologyError(
                        f"GPU {source} -> {target}: unknown PCIe topology level {level!r}"
                    )
                count = _count(nvlinks[i], nvlinks[j], buses[j])
                links.append(GpuLink(source, target, levels[level], count))
        return links
    except nvml.NVMLError as err:
        raise TopologyError(f"NVML could not read the GPU topology ({err})") from err


def _count(mine: _NvLinks, theirs: _NvLinks, their_bus: str) -> int:
    direct = sum(bus == their_bus for bus in mine.remote_buses)
    if direct or not mine.remote_buses:
        return direct
    if mine.switch_links and theirs.switch_links:
        return min(mine.switch_links, theirs.switch_links)
    return 0


def _nvlinks(nvml: ModuleType, handle: Any) -> _NvLinks:
    buses: list[str] = []
    switches = 0
    for link in range(int(nvml.NVML_NVLINK_MAX_LINKS)):
        try:
            if nvml.nvmlDeviceGetNvLinkState(handle, link) != nvml.NVML_FEATURE_ENABLED:
                continue
        except (nvml.NVMLError_NotSupported, nvml.NVMLError_InvalidArgument):
            continue  # no NVLink on this GPU, or past its last link
        buses.append(_bus(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId))
        kind = _remote_type(nvml, handle, link)
        switches += kind == getattr(nvml, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)
    return _NvLinks(tuple(buses), switches)


def _remote_type(nvml: ModuleType, handle: Any, link: int) -> int | None:
    try:
        return int(nvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link))
    except nvml.NVMLError_NotSupported:
        return None


def _bus(bus_id: str | bytes) -> str:
    """A PCI bus id in one spelling: NVML writes `00000000:3B:00.0` here and `0000:3b:00.0`
    elsewhere."""
    domain, _, rest = text(bus_id).strip().lower().partition(":")
    try:
        return f"{int(domain, 16):04x}:{rest}" if rest else domain
    except ValueError:
        return f"{domain}:{rest}"
