"""Writing grants on pods: the annotations (signed), and patches whose outcome is known.

A patch carries the resourceVersion of the pod it was decided on, so a write based on a
superseded read fails (409) instead of winning; on a 409 the pod is read again and the patch
retried once if the pod is still unbound and its grant unchanged. A patch that fails
ambiguously (timeout, reset, 5xx) is settled by reading the pod live: the annotations are
there or they are not. If that read fails too, the outcome is UNKNOWN and the caller keeps
what it reserved.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

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
from vgpu.ports.cluster import ClusterError, ClusterPort, Conflict, Rejected

Notes = Mapping[str, str | None]


class Outcome(Enum):
    WRITTEN = "written"
    REFUSED = "refused"  # the API did not apply it
    UNKNOWN = "unknown"  # it may or may not have been applied; nobody could tell


@dataclass(frozen=True, slots=True)
class Written:
    outcome: Outcome
    detail: str = ""  # why it was refused or is unknown


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
    """Annotation patches with a resourceVersion precondition and a known outcome."""

    def __init__(self, cluster: ClusterPort, vendor: Vendor, fence: Fence) -> None:
        self._cluster = cluster
        self._vendor = vendor
        self._fence = fence

    def patch(self, pod: Pod, annotations: Notes, labels: Notes | None = None) -> Written:
        """Patch `pod` as last read; see the module's description for what happens on failure."""
        version = pod.resource_version or None
        for attempt in (1, 2):
            try:
                self._fence.check(f"annotations of pod {pod.key}")
                self._cluster.patch_pod_annotations(
                    pod.namespace, pod.name, annotations, labels, resource_version=version
                )
                return Written(Outcome.WRITTEN)
            except Conflict as exc:
                current = self.read(pod)
                if isinstance(current, Written):
                    return current
                if attempt == 2 or not self._same_unbound(pod, current):
                    return Written(Outcome.REFUSED, str(exc))
                version = current.resource_version if current is not None else None
            except Rejected as exc:
                return Written(Outcome.REFUSED, str(exc))
            except ClusterError as exc:
                current = self.read(pod)
                if isinstance(current, Written):
                    return Written(Outcome.UNKNOWN, f"{exc}; {current.detail}")
                if current is not None and current.uid == pod.uid and _shows(current, annotations):
                    return Written(Outcome.WRITTEN)
                return Written(Outcome.REFUSED, str(exc))
        raise AssertionError("unreachable: the second attempt always returns")

    def read(self, pod: Pod) -> Pod | Written | None:
        """The pod live from the API; an UNKNOWN Written when it cannot be read."""
        try:
            return self._cluster.read_pod(pod.namespace, pod.name)
        except ClusterError as exc:
            return Written(Outcome.UNKNOWN, f"reading pod {pod.key} back failed: {exc}")

    def _same_unbound(self, before: Pod, current: Pod | None) -> bool:
        """Whether a retry would still act on the pod the caller decided on."""
        if current is None or current.node_name or current.uid != before.uid:
            return False
        vendor = self._vendor
        return grant_claim(current.uid, current.annotations, vendor) == grant_claim(
            before.uid, before.annotations, vendor
        )


def _shows(pod: Pod, annotations: Notes) -> bool:
    """Whether the pod carries exactly what the patch wrote (None: key absent)."""
    return all(pod.annotations.get(key) == value for key, value in annotations.items())
