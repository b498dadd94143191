"""The NUMA node of a PCI device, read from sysfs as NVIDIA's device plugin does."""

import logging
from pathlib import Path

log = logging.getLogger(__name__)


def sysfs_bus_id(nvml_bus_id: str | bytes) -> str:
    """Sysfs's name for a PCI device given NVML's bus id.

    NVML writes the domain with 8 hex digits in upper case (`00000000:3B:00.0`); sysfs names
    the device with at least 4 domain digits in lower case (`0000:3b:00.0`).
    """
    text = nvml_bus_id.decode() if isinstance(nvml_bus_id, bytes) else nvml_bus_id
    text = text.strip().rstrip("\x00").lower()
    domain, sep, rest = text.partition(":")
    if not sep:
        return text
    try:
        return f"{int(domain, 16):04x}:{rest}"
    except ValueError:
        return text


UNKNOWN_NUMA = -1  # what sysfs writes for a device attached to no NUMA node


def numa_node(nvml_bus_id: str | bytes, sysfs_root: Path = Path("/sys")) -> int:
    """The device's NUMA node; -1 when sysfs does not know it (-1, missing or unreadable).

    Unknown stays unknown here: the kubelet must get no NUMA node rather than a wrong one, and
    the register annotation writes 0 for it, as HAMi does (`vgpu.domain.inventory`)."""
    path = sysfs_root / "bus" / "pci" / "devices" / sysfs_bus_id(nvml_bus_id) / "numa_node"
    try:
        text = path.read_text().strip()
    except OSError as err:
        log.info("NUMA node unknown for PCI device %s (%s)", nvml_bus_id, err)
        return UNKNOWN_NUMA
    try:
        node = int(text)
    except ValueError:
        log.warning("%s holds %r, not a number; NUMA node unknown", path, text)
        return UNKNOWN_NUMA
    return max(node, UNKNOWN_NUMA)
