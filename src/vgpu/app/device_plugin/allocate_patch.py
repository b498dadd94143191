"""What an Allocate leaves on the pod, in one patch: the served containers emptied in
`to-allocate`, bind phase `success` once no container is left, and, when MIG instances were
served, the reservations with their runtime identity. That last patch is written only on the pod
version the reservations were read from (`vgpu.app.preconditioned_patch`): when the pod changed
meanwhile (a status update) but neither its grant nor its reservations did, once more on the
fresh version; otherwise it is refused."""

from collections.abc import Sequence

from vgpu.app.device_plugin.pending import SUCCESS
from vgpu.app.preconditioned_patch import Outcome, patch_preconditioned
from vgpu.domain.codec import encode_pod_grants
from vgpu.domain.grant import ContainerGrant
from vgpu.domain.mig import MIG_ALLOCATIONS_ANNOTATION
from vgpu.domain.pod import Pod
from vgpu.domain.vendor import BIND_PHASE_ANNOTATION, Vendor
from vgpu.ports.cluster import ClusterPort
from vgpu.ports.kubelet import DevicePluginError


class AllocatePatch:
    def __init__(self, cluster: ClusterPort, vendor: Vendor) -> None:
        self._cluster = cluster
        self._vendor = vendor

    def write(self, pod: Pod, left: Sequence[ContainerGrant], mig_reservations: str | None) -> None:
        """`left`: each container's cards still to serve; `mig_reservations`: the
        reservations with runtime identities, None when no MIG instance was served. Raises
        ClusterError or DevicePluginError when the patch is not written."""
        patch = {self._vendor.to_allocate_annotation: encode_pod_grants(tuple(left))}
        if not any(left):
            patch[BIND_PHASE_ANNOTATION] = SUCCESS
        if mig_reservations is None:
            self._cluster.patch_pod_annotations(pod.namespace, pod.name, patch)
            return
        patch[MIG_ALLOCATIONS_ANNOTATION] = mig_reservations
        written = patch_preconditioned(
            self._cluster, pod, patch, unchanged=self._same_grant, settle=False
        )
        if written.outcome is not Outcome.WRITTEN:
            raise DevicePluginError(written.detail)

    def _same_grant(self, before: Pod, current: Pod) -> bool:
        """Whether the pod still has the grant and the reservations the call served."""
        keys = (self._vendor.to_allocate_annotation, MIG_ALLOCATIONS_ANNOTATION)
        return all(current.annotations.get(k) == before.annotations.get(k) for k in keys)
