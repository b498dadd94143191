"""The devices `vgpu dra-driver` publishes for its node's GPUs: the domain's shared GPU device
(`gpu_device`, the same the simulator publishes) plus what only a real node knows, the CUDA
driver's version and the GPU's PCI address (under vgpu's name and Kubernetes' standard one, so
claims can align a GPU with a NIC on the same PCIe root).

>>> card = GpuCard("GPU-a", 0, "Tesla V100-PCIE-32GB", memory_mib=32768)
>>> device = node_device(card, pci_bus_id="0000:3b:00.0", cuda_driver_version="12.4")
>>> device.name, device.attributes["cudaDriverVersion"], device.attributes[STANDARD_PCI_BUS_ID]
('gpu-0', Version(text='12.4.0'), '0000:3b:00.0')
"""

from dataclasses import replace

from vgpu.domain.dra.gpu import GpuCard, driver_version, gpu_device
from vgpu.domain.dra.model import AttributeValue, Device

STANDARD_PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
"""The attribute Kubernetes standardises for a device's PCI address, published beside ours."""


def node_device(card: GpuCard, pci_bus_id: str = "", cuda_driver_version: str = "") -> Device:
    """One GPU's device with the node's own attributes; those not known are left out."""
    device = gpu_device(card)
    extra: dict[str, AttributeValue] = {}
    if cuda_driver_version:
        extra["cudaDriverVersion"] = driver_version(cuda_driver_version)
    if pci_bus_id:
        extra["pciBusID"] = pci_bus_id
        extra[STANDARD_PCI_BUS_ID] = pci_bus_id
    return replace(device, attributes={**device.attributes, **extra})
