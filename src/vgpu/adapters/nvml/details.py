"""A GPU's description for DRA's device attributes, read from NVML: its architecture (from the
CUDA compute capability), PCI bus id and the driver's versions. Whatever NVML cannot say is
left empty and the attribute unpublished; nothing here fails discovery."""

import logging
from typing import Any

from vgpu.adapters.nvml.library import text
from vgpu.adapters.nvml.sysfs import sysfs_bus_id
from vgpu.ports.gpu import GpuDetails

log = logging.getLogger(__name__)

# CUDA compute capability major (and minor where a major spans two) to NVIDIA's name
_ARCHITECTURES = {
    (3, None): "Kepler",
    (5, None): "Maxwell",
    (6, None): "Pascal",
    (7, 0): "Volta",
    (7, 2): "Volta",
    (7, 5): "Turing",
    (8, 9): "Ada Lovelace",
    (8, None): "Ampere",
    (9, None): "Hopper",
    (10, None): "Blackwell",
    (12, None): "Blackwell",
}


def architecture(major: int, minor: int) -> str:
    """NVIDIA's name for a compute capability: (8, 0) -> `Ampere`, (8, 9) -> `Ada Lovelace`;
    "" for one this table does not know."""
    return _ARCHITECTURES.get((major, minor)) or _ARCHITECTURES.get((major, None), "")


def cuda_version(encoded: int) -> str:
    """NVML's CUDA driver version number as text: 12040 -> `12.4`."""
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def read_details(nvml: Any, handle: Any, index: int) -> GpuDetails:
    """One GPU's details; what NVML cannot read is "" (logged at debug level)."""
    return GpuDetails(
        architecture=_read(nvml, index, "compute capability", lambda: architecture(
            *nvml.nvmlDeviceGetCudaComputeCapability(handle)
        )),
        pci_bus_id=_read(
            nvml, index, "PCI bus id", lambda: sysfs_bus_id(nvml.nvmlDeviceGetPciInfo(handle).busId)
        ),
        driver_version=_read(nvml, index, "driver version", lambda: text(
            nvml.nvmlSystemGetDriverVersion()
        )),
        cuda_driver_version=_read(nvml, index, "CUDA driver version", lambda: cuda_version(
            int(nvml.nvmlSystemGetCudaDriverVersion())
        )),
    )


def _read(nvml: Any, index: int, what: str, read: Any) -> str:
    try:
        return str(read())
    except (nvml.NVMLError, AttributeError, TypeError, ValueError) as err:
        log.debug("GPU %d: NVML cannot read its %s (%s)", index, what, err)
        return ""
