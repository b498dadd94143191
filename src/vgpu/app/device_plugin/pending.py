"""Which pod the kubelet is starting: the one the scheduler bound to this node and locked it for.

HAMi's handshake (docs/protocol.md#bind-and-allocate): the scheduler's bind leaves
`hami.io/bind-phase=allocating`
and the node lock `hami.io/mutex.lock` naming the pod; the kubelet's Allocate carries no pod
name, so the plugin looks the pod up. Only pods whose grant is trusted (see `trust`) and whose
`to-allocate` text is what is left of the signed `allocated` text are candidates: a tenant's own
annotations can neither jump the queue nor raise what is served.
"""

import logging
from dataclasses import dataclass, field, replace

from vgpu.app.device_plugin.trust import NodeGrantTrust, container_label, pod_grants
from vgpu.domain.errors import CodecError, DomainError
from vgpu.domain.grant import ContainerGrant, PodGrants
from vgpu.domain.hostile_text import INT64, whole_number
from vgpu.domain.nodelock import parse_node_lock
from vgpu.domain.pod import Pod
from vgpu.domain.trust import GrantClaim, GrantVerdict
from vgpu.domain.vendor import (
    BIND_PHASE_ANNOTATION,
    BIND_TIME_ANNOTATION,
    NODE_LOCK_ANNOTATION,
    Vendor,
)
from vgpu.ports.cluster import ClusterPort

log = logging.getLogger(__name__)

ALLOCATING = "allocating"
SUCCESS = "success"
FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Waiting:
    """The pod to serve (None when no trusted one waits) with its trusted `allocated` grants
    and the claim they were read from, and the waiting pods refused, why."""

    chosen: Pod | None = None
    grants: PodGrants = ()
    refused: list[tuple[Pod, str]] = field(default_factory=list)
    claim: GrantClaim | None = None


def find_pending_pod(
    cluster: ClusterPort, node: str, vendor: Vendor, trust: NodeGrantTrust
) -> Waiting:
    """The node lock's owner if it waits here with a trusted grant, else the oldest such pod.

    A pod waits when it is Pending, bound to `node`, in bind phase `allocating`, and has
    containers left to serve (or an unreadable grant, which is then refused with the reason).
    """
    trusted: list[tuple[Pod, GrantVerdict]] = []
    refused: list[tuple[Pod, str]] = []
    for pod in cluster.list_pods(node):
        if not is_waiting(pod, node, vendor):
            continue
        verdict = trust.judge(pod)
        problem = verdict.problem
        if not problem and verdict.grants is not None:
            problem = to_allocate_problem(pod, vendor, verdict.grants) or ""
            if not problem:
                trusted.append((pod, verdict))
                continue
        refused.append((pod, problem))
    if not trusted:
        return Waiting(None, (), refused)
    owner = _lock_owner(cluster, node)
    trusted.sort(key=lambda t: (t[0].key != owner, _bind_time(t[0]), t[0].namespace, t[0].name))
    pod, verdict = trusted[0]
    return Waiting(pod, verdict.grants or (), refused, verdict.claim)


def is_waiting(pod: Pod, node: str, vendor: Vendor) -> bool:
    annotations = pod.annotations
    if (
        pod.phase != "Pending"
        or pod.node_name != node
        or annotations.get(BIND_PHASE_ANNOTATION) != ALLOCATING
    ):
        return False
    if vendor.to_allocate_annotation not in annotations:
        return False
    try:
        return any(pod_grants(pod, vendor.to_allocate_annotation))
    except CodecError:
        return True


def to_allocate_problem(pod: Pod, vendor: Vendor, allocated: PodGrants) -> str | None:
    """Why `to-allocate` is not what is left of the `allocated` grants; None when it is.

    Each container's segment must equal the allocated one at the same index, or be empty
    (already served). Anything else (a raised amount, another or an added card) is refused.
    """
    key = vendor.to_allocate_annotation
    try:
        left = pod_grants(pod, key)
    except CodecError as exc:
        return str(exc)
    for index, segment in enumerate(left):
        # the trusted grants carry their MIG instances; the device lists compare without them
        granted = (
            tuple(replace(g, mig=None) for g in allocated[index]) if index < len(allocated) else ()
        )
        if segment and segment != granted:
            return (
                f"container {container_label(pod, index)}: {key} asks for "
                f"{_cards(segment)} but {vendor.allocated_annotation} grants "
                f"{_cards(granted) or 'nothing'}"
            )
    return None


def _cards(segment: ContainerGrant) -> str:
    return ", ".join(f"{g.uuid} {g.memory} MiB {g.cores}% cores" for g in segment)


def _lock_owner(cluster: ClusterPort, node: str) -> str | None:
    """`namespace/name` of the pod holding the node lock, if it is readable."""
    current = cluster.get_node(node)
    value = None if current is None else current.annotations.get(NODE_LOCK_ANNOTATION)
    if not value:
        return None
    try:
        lock = parse_node_lock(value)
    except DomainError as exc:
        log.warning("node %s: ignoring unreadable node lock: %s", node, exc)
        return None
    return f"{lock.namespace}/{lock.pod}" if lock.pod else None


def _bind_time(pod: Pod) -> int:
    try:
        return whole_number(pod.annotations.get(BIND_TIME_ANNOTATION, ""), *INT64)
    except ValueError:
        return 0
