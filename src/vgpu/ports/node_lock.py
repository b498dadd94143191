"""HAMi's node lock for one pod, taken and released through any `ClusterPort`.

HAMi's NVIDIA device takes `hami.io/mutex.lock` on the node a pod binds to only when the pod
asks for its cards, and releases it the same way; these give an embedding scheduler that rule
over whichever cluster adapter it uses (the value rules are `vgpu.domain.nodelock`).
"""

from datetime import timedelta

from vgpu.domain.nodelock import DEFAULT_EXPIRY, locks_node
from vgpu.domain.pod import Pod
from vgpu.domain.vendor import NVIDIA, Vendor
from vgpu.ports.cluster import ClusterPort


def lock_node_for_pod(
    cluster: ClusterPort,
    node: str,
    pod: Pod,
    vendor: Vendor = NVIDIA,
    expiry: timedelta = DEFAULT_EXPIRY,
) -> bool:
    """Take the node's lock for `pod` (HAMi's LockNode); False, with nothing written, when no
    app container asks for `vendor`'s cards. Raises the port's Conflict while another live pod
    holds a lock younger than `expiry`, NotFound for a missing node."""
    if not locks_node(pod, vendor):
        return False
    cluster.lock_node(node, pod.namespace, pod.name, expiry)
    return True


def release_node_lock_for_pod(
    cluster: ClusterPort, node: str, pod: Pod, vendor: Vendor = NVIDIA
) -> bool:
    """Remove the node's lock if `pod` holds it (or it is a legacy lock naming no pod);
    False, with nothing written, when no app container asks for `vendor`'s cards. A node that
    no longer exists holds no lock: releasing there succeeds quietly."""
    if not locks_node(pod, vendor):
        return False
    cluster.release_node_lock(node, pod.namespace, pod.name)
    return True
