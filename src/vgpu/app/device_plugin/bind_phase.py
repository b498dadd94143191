"""HAMi's bind-phase bookkeeping around Allocate (docs/protocol.md#bind-and-allocate): a refused
pod is marked `failed`, gets a GPUAllocationFailed event and its node lock is released; a pod
whose last container is served releases the lock (its `success` goes in the Allocate patch)."""

import logging

from vgpu.app.device_plugin.pending import FAILED, SUCCESS
from vgpu.domain.pod import Pod
from vgpu.domain.vendor import BIND_PHASE_ANNOTATION
from vgpu.ports.cluster import ClusterError, ClusterPort

log = logging.getLogger(__name__)

ALLOCATION_FAILED = "GPUAllocationFailed"


class BindPhase:
    def __init__(self, cluster: ClusterPort, node: str) -> None:
        self._cluster = cluster
        self._node = node

    def failed(self, pod: Pod, reason: str) -> None:
        """Mark `pod` failed, record why, release its node lock."""
        log.error("Allocate for pod %s failed: %s", pod.key, reason)
        try:
            self._cluster.patch_pod_annotations(
                pod.namespace, pod.name, {BIND_PHASE_ANNOTATION: FAILED}
            )
            self._cluster.record_event(
                pod.namespace, pod.name, ALLOCATION_FAILED, reason, warning=True
            )
        except ClusterError as exc:
            log.error("could not mark pod %s as failed: %s", pod.key, exc)
        self._release_lock(pod)

    def completed(self, pod: Pod) -> None:
        """Every container of `pod` is served (bind phase success): free the node."""
        self._release_lock(pod)
        log.info("pod %s has all its GPUs: bind phase %s, node lock released", pod.key, SUCCESS)

    def _release_lock(self, pod: Pod) -> None:
        try:
            self._cluster.release_node_lock(self._node, pod.namespace, pod.name)
        except ClusterError as exc:
            log.error("could not release the lock on node %s for %s: %s", self._node, pod.key, exc)
