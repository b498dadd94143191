"""Which grant segment answers each container the kubelet asks about, and the checks it must
pass first: the next container with cards left in `to-allocate`, as many devices as it was
granted, only devices this plugin advertised, and only cards of this plugin's vendor."""

from collections.abc import Sequence

from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.domain.grant import ContainerGrant
from vgpu.domain.pod import Container, Pod
from vgpu.domain.vendor import Vendor
from vgpu.ports.kubelet import DevicePluginError


class Segments:
    def __init__(self, gpus: GpuState, vendor: Vendor) -> None:
        self._gpus = gpus
        self._vendor = vendor

    def next_index(self, grants: Sequence[ContainerGrant], device_ids: Sequence[str]) -> int:
        """The first container with cards left; refused when none is."""
        index = next((i for i, c in enumerate(grants) if c), None)
        if index is None:
            raise DevicePluginError(
                f"the kubelet asks for {len(device_ids)} device(s) but "
                f"{self._vendor.to_allocate_annotation} has no container left to serve"
            )
        return index

    def container(self, pod: Pod, index: int) -> Container:
        """The container a segment is for; refused when the pod has no such container."""
        if index >= len(pod.containers):
            raise DevicePluginError(
                f"{self._vendor.to_allocate_annotation} has grants for container #{index} but "
                f"the pod has only {len(pod.containers)} container(s)"
            )
        return pod.containers[index]

    def check(self, container: str, device_ids: Sequence[str], segment: ContainerGrant) -> None:
        """The kubelet's devices against the segment: refused unless the counts match, every
        device was advertised here and every card is granted for this plugin's vendor."""
        if len(device_ids) != len(segment):
            raise DevicePluginError(
                f"container {container!r}: the kubelet asks for {len(device_ids)} "
                f"device(s) but the scheduler granted {len(segment)} "
                f"({', '.join(g.uuid for g in segment)})"
            )
        self._check_advertised(container, device_ids)
        for grant in segment:
            if grant.vendor != self._vendor.word:
                raise DevicePluginError(
                    f"container {container!r}: card {grant.uuid} is granted as vendor "
                    f"{grant.vendor!r}, not {self._vendor.word!r}"
                )

    def _check_advertised(self, container: str, device_ids: Sequence[str]) -> None:
        """The kubelet asks only for devices this plugin advertised: any other id means its
        count of what it handed out is not ours, so the container is refused (as HAMi refuses
        an unknown MIG device)."""
        unknown = [i for i in device_ids if self._gpus.physical_uuid(i) is None]
        if unknown:
            raise DevicePluginError(
                f"container {container!r}: the kubelet asks for unknown device(s) "
                f"{', '.join(unknown)}, which this plugin never advertised"
            )
