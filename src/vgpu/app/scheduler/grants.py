"""Writing grants on pods: the annotations (signed), and patches whose outcome is known.

A patch carries the resourceVersion of the pod it was decided on, so a write based on a
superseded read fails (409) instead of winning; on a 409 the pod is read again and the patch
retried once if the pod is still unbound and its grant unchanged. A patch that fails
ambiguously (timeout, reset, 5xx) is settled by reading the pod live: the annotations are
there or they are not. If that read fails too, the outcome is UNKNOWN and the caller keeps
what it reserved. (The device plugin's Allocate patch shares these rules:
`vgpu.app.preconditioned_patch`.)
"""

from vgpu.app.preconditioned_patch import (
    Notes,
    Written,
    patch_preconditioned,
    read_live,
)
from vgpu.app.scheduler.fence import Fence
from vgpu.app.scheduler.trust import GrantTrust, grant_identity
from vgpu.domain import Pod, PodGrants, Vendor, encode_pod_grants
from vgpu.domain.mig import MIG_ALLOCATIONS_ANNOTATION, encode_mig_allocations
from vgpu.domain.mig.grants import mig_reservations
from vgpu.domain.trust import GRANT_SIGNATURE_ANNOTATION, GrantClaim, grant_claim
from vgpu.domain.vendor import (
    ASSIGNED_NODE_ANNOTATION,
    ASSIGNED_NODE_LABEL,
    ASSIGNED_TIME_ANNOTATION,
)
from vgpu.ports.cluster import ClusterPort


def grant_annotations(
    pod: Pod, node: str, grants: PodGrants, now: float, vendor: Vendor, trust: GrantTrust
) -> tuple[dict[str, str | None], dict[str, str]]:
    """HAMi's placement annotations (and label) for `pod`, plus the grant signature.

    The MIG reservations (`hami.io/vgpu-mig-allocations`) go in the same patch, before
    signing, since the signature covers them; a grant without MIG instances removes the key
    (None) when the pod has one, so that reservations left by an earlier placement cannot
    spoil the new signature. (The patch carries the resourceVersion the pod was read at.)
    """
    encoded = encode_pod_grants(grants)
    annotations: dict[str, str] = {
        ASSIGNED_NODE_ANNOTATION: node,
        ASSIGNED_TIME_ANNOTATION: str(int(now)),
        vendor.to_allocate_annotation: encoded,
        vendor.allocated_annotation: encoded,
    }
    reservations = encode_mig_allocations(mig_reservations(grants))
    if reservations:
        annotations[MIG_ALLOCATIONS_ANNOTATION] = reservations
    claim = grant_claim(pod.uid, annotations, vendor)
    assert claim is not None  # node and allocated are set just above
    annotations.update(trust.sign(claim))
    patch: dict[str, str | None] = dict(annotations)
    if MIG_ALLOCATIONS_ANNOTATION in pod.annotations and not reservations:
        patch[MIG_ALLOCATIONS_ANNOTATION] = None
    return patch, {ASSIGNED_NODE_LABEL: node}


def written_identity(pod: Pod, annotations: Notes, vendor: Vendor) -> str:
    """The grant identity (trust.grant_identity) of annotations made by `grant_annotations`."""
    claim = written_claim(pod, annotations, vendor)
    assert claim is not None  # grant_annotations always writes the node and the cards
    return grant_identity(claim)


def written_claim(pod: Pod, annotations: Notes, vendor: Vendor) -> GrantClaim | None:
    """The grant `pod` carries once `annotations` (a patch: None removes a key) are written."""
    merged = {**pod.annotations, **annotations}
    written = {key: value for key, value in merged.items() if value is not None}
    return grant_claim(pod.uid, written, vendor)


def revoked_annotations(vendor: Vendor) -> tuple[dict[str, None], dict[str, None]]:
    """The patch that takes a grant off a pod."""
    keys = (
        ASSIGNED_NODE_ANNOTATION,
        ASSIGNED_TIME_ANNOTATION,
        vendor.to_allocate_annotation,
        vendor.allocated_annotation,
        MIG_ALLOCATIONS_ANNOTATION,
        GRANT_SIGNATURE_ANNOTATION,
    )
    return dict.fromkeys(keys), {ASSIGNED_NODE_LABEL: None}


class PodWriter:
    """The scheduler's annotation patches (`vgpu.app.preconditioned_patch`), behind the leader
    fence: a retry after a 409 only while the pod is still unbound with the grant it was
    decided on, and ambiguous failures settled by a live read."""

    def __init__(self, cluster: ClusterPort, vendor: Vendor, fence: Fence) -> None:
        self._cluster = cluster
        self._vendor = vendor
        self._fence = fence

    def patch(self, pod: Pod, annotations: Notes, labels: Notes | None = None) -> Written:
        """Patch `pod` as last read; WRITTEN, REFUSED or UNKNOWN (with why)."""
        return patch_preconditioned(
            self._cluster,
            pod,
            annotations,
            labels,
            unchanged=self._same_unbound,
            before_write=lambda: self._fence.check(f"annotations of pod {pod.key}"),
        )

    def read(self, pod: Pod) -> Pod | Written | None:
        """The pod live from the API; an UNKNOWN Written when it cannot be read."""
        return read_live(self._cluster, pod)

    def _same_unbound(self, before: Pod, current: Pod) -> bool:
        """Whether a retry would still act on the pod the caller decided on."""
        if current.node_name:
            return False
        vendor = self._vendor
        return grant_claim(current.uid, current.annotations, vendor) == grant_claim(
            before.uid, before.annotations, vendor
        )
