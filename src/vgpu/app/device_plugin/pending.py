"""Which pod the kubelet is starting: the one the scheduler bound to this node and locked it for.

HAMi's handshake (contracts.md 4.6): the scheduler's bind leaves `hami.io/bind-phase=allocating`
and the node lock `hami.io/mutex.lock` naming the pod; the kubelet's Allocate carries no pod
name, so the plugin looks the pod up.
"""

import logging

from vgpu.domain.codec import decode_pod_grants
from vgpu.domain.errors import CodecError, DomainError
from vgpu.domain.nodelock import parse_node_lock
from vgpu.domain.pod import Pod
from vgpu.domain.vendor import (
    ASSIGNED_NODE_ANNOTATION,
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


def find_pending_pod(cluster: ClusterPort, node: str, vendor: Vendor) -> Pod | None:
    """The node lock's owner if it is waiting here, else the oldest waiting pod on the node.

    A pod is waiting when it is Pending, assigned to `node` by the scheduler, in bind phase
    `allocating`, and still has granted containers left to serve (or an unreadable grant
    annotation, which Allocate then reports).
    """
    current = cluster.get_node(node)
    lock_value = None if current is None else current.annotations.get(NODE_LOCK_ANNOTATION)
    if lock_value:
        try:
            lock = parse_node_lock(lock_value)
        except DomainError as exc:
            log.warning("node %s: ignoring unreadable node lock: %s", node, exc)
        else:
            owner = cluster.get_pod(lock.namespace, lock.pod) if lock.pod else None
            if owner is not None and is_waiting(owner, node, vendor):
                return owner
    waiting = [p for p in cluster.list_pods(node) if is_waiting(p, node, vendor)]
    waiting.sort(key=lambda p: (_bind_time(p), p.namespace, p.name))
    return waiting[0] if waiting else None


def is_waiting(pod: Pod, node: str, vendor: Vendor) -> bool:
    annotations = pod.annotations
    if (
        pod.phase != "Pending"
        or annotations.get(ASSIGNED_NODE_ANNOTATION) != node
        or annotations.get(BIND_PHASE_ANNOTATION) != ALLOCATING
        or pod.node_name not in ("", node)
    ):
        return False
    text = annotations.get(vendor.to_allocate_annotation)
    if text is None:
        return False
    try:
        return any(decode_pod_grants(text, vendor.to_allocate_annotation))
    except CodecError:
        return True


def _bind_time(pod: Pod) -> int:
    try:
        return int(pod.annotations.get(BIND_TIME_ANNOTATION, ""))
    except ValueError:
        return 0
