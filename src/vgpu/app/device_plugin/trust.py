"""Whether a pod's grant came from the scheduler, so that the plugin may serve and count it.

Any tenant can write annotations on its own pods, so a grant is believed only when
- the pod is bound to this node and `hami.io/vgpu-node` names this node,
- `hami.io/vgpu-devices-allocated` reads as grants (the codec refuses a card twice in one
  container, unless `hami.io/vgpu-mig-allocations` places each of its MIG devices apart), and
- with signing on, `vgpu.io/grant-signature` verifies for (pod uid, this node, `hami.io/vgpu-time`,
  the allocated text, the MIG reservations); with signing off (HAMi's scheduler, which does not
  sign), the pod names one of the trusted schedulers.
"""

from typing import Protocol

from vgpu.app.device_plugin.keyring import KeyRingCache
from vgpu.domain.codec import decode_pod_grants
from vgpu.domain.errors import CodecError
from vgpu.domain.grant import PodGrants
from vgpu.domain.mig_allocations import MIG_ALLOCATIONS_ANNOTATION, decode_mig_allocations
from vgpu.domain.pod import Pod
from vgpu.domain.signing import GRANT_SIGNATURE_ANNOTATION, grant_claim
from vgpu.domain.vendor import ASSIGNED_NODE_ANNOTATION, ASSIGNED_TIME_ANNOTATION, Vendor


class GrantTrust(Protocol):
    def problem(self, pod: Pod) -> str | None:
        """Why the pod's grant is not to be believed on this node; None when it is.

        May raise KeyRingUnavailable: then nothing can be decided either way.
        """
        ...


class SignedGrants:
    """Believes grants whose signature verifies for this pod on this node."""

    def __init__(self, ring: KeyRingCache, node: str, vendor: Vendor) -> None:
        self._ring = ring
        self._node = node
        self._vendor = vendor

    def problem(self, pod: Pod) -> str | None:
        found = _unsigned_problem(pod, self._node, self._vendor)
        if found is not None:
            return found
        signature = pod.annotations.get(GRANT_SIGNATURE_ANNOTATION)
        if not signature:
            return f"the grant has no {GRANT_SIGNATURE_ANNOTATION} (not written by the scheduler)"
        claim = grant_claim(pod.uid, pod.annotations, self._vendor)  # node: checked above
        if claim is None or not self._ring.verify(signature, claim):
            return (
                f"{GRANT_SIGNATURE_ANNOTATION} does not verify for this pod's uid, node "
                f"{self._node}, {ASSIGNED_TIME_ANNOTATION}, {self._vendor.allocated_annotation} "
                f"and the MIG reservations (forged, copied or altered grant)"
            )
        return None


class NamedSchedulerGrants:
    """Signing off: believes grants on pods that name a trusted scheduler and are bound here."""

    def __init__(self, schedulers: frozenset[str], node: str, vendor: Vendor) -> None:
        self._schedulers = schedulers
        self._node = node
        self._vendor = vendor

    def problem(self, pod: Pod) -> str | None:
        found = _unsigned_problem(pod, self._node, self._vendor)
        if found is not None:
            return found
        if pod.scheduler_name not in self._schedulers:
            return (
                f"the pod names scheduler {pod.scheduler_name!r}, not one of the trusted "
                f"schedulers ({', '.join(sorted(self._schedulers))})"
            )
        return None


def allocated_grants(pod: Pod, vendor: Vendor) -> PodGrants:
    """The pod's `allocated` grants; CodecError when they do not read (checked by `problem`)."""
    return pod_grants(pod, vendor.allocated_annotation)


def pod_grants(pod: Pod, key: str) -> PodGrants:
    """The grants in the pod's annotation `key` (`allocated` or `to-allocate`), where a card
    may repeat in a container only as MIG devices its reservations place apart; CodecError
    when the grants or the reservations do not read."""
    reservations = decode_mig_allocations(pod.annotations.get(MIG_ALLOCATIONS_ANNOTATION, ""))
    return decode_pod_grants(pod.annotations.get(key, ""), key, reservations)


def container_label(pod: Pod, index: int) -> str:
    """The name of the container a grant segment is for, or its index when there is none."""
    return repr(pod.containers[index].name) if index < len(pod.containers) else f"#{index}"


def _unsigned_problem(pod: Pod, node: str, vendor: Vendor) -> str | None:
    """What both modes check: bound here, assigned here, a readable grant without repeats."""
    assigned = pod.annotations.get(ASSIGNED_NODE_ANNOTATION, "")
    if pod.node_name != node or assigned != node:
        return (
            f"the pod is bound to node {pod.node_name!r} and {ASSIGNED_NODE_ANNOTATION} names "
            f"{assigned!r}; both must be this node, {node}"
        )
    if vendor.allocated_annotation not in pod.annotations:
        return f"the pod has no {vendor.allocated_annotation}"
    try:  # the codec also refuses a container that names one card twice
        allocated_grants(pod, vendor)
    except CodecError as exc:
        return str(exc)
    return None
