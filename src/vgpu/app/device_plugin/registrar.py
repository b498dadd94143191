"""Publishes the node's GPUs in `hami.io/node-nvidia-register` for the scheduler.

Checked every `interval` seconds and at once after a health change; the node is patched only
when the annotation differs from what it should be (so a deleted or edited annotation comes
back). Failures are logged and retried after `retry` seconds.
"""

import logging
import threading

from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.domain.codec import encode_node_devices
from vgpu.domain.errors import DomainError
from vgpu.domain.vendor import Vendor
from vgpu.ports.cluster import ClusterError, ClusterPort

log = logging.getLogger(__name__)


class NodeRegistrar:
    def __init__(
        self,
        cluster: ClusterPort,
        gpus: GpuState,
        node: str,
        vendor: Vendor,
        interval_s: float = 30.0,
        retry_s: float = 5.0,
    ) -> None:
        self._cluster = cluster
        self._gpus = gpus
        self._node = node
        self._vendor = vendor
        self._interval = interval_s
        self._retry = retry_s
        self._wake = threading.Event()
        gpus.on_change(self._wake.set)

    def sync(self) -> bool:
        """Make the node's annotation match the GPUs; False (logged) when that failed."""
        key = self._vendor.register_annotation
        devices = self._gpus.registered_devices()
        wanted = encode_node_devices(devices)
        try:
            node = self._cluster.get_node(self._node)
            if node is None:
                log.error("cannot register GPUs: node %s not found in the cluster", self._node)
                return False
            if node.annotations.get(key) == wanted:
                log.debug("node %s: %s is up to date", self._node, key)
                return True
            self._cluster.patch_node_annotations(self._node, {key: wanted})
        except (ClusterError, DomainError) as exc:
            log.error("cannot register GPUs on node %s: %s", self._node, exc)
            return False
        healthy = sum(d.healthy for d in devices)
        log.info(
            "registered %d GPU(s) (%d healthy) on node %s in %s: %s",
            len(devices),
            healthy,
            self._node,
            key,
            wanted,
        )
        return True

    def run(self, stop: threading.Event) -> None:
        """Sync until `stop` is set: every interval, after a change, sooner after a failure."""
        while not stop.is_set():
            self._wake.clear()
            try:
                ok = self.sync()
            except Exception:  # a thread that must outlive any one bad answer from the API
                log.exception("registering GPUs on node %s failed unexpectedly", self._node)
                ok = False
            self._wake.wait(self._interval if ok else self._retry)

    def wake(self) -> None:
        """Sync now (used on shutdown to end `run`'s wait, and by health changes)."""
        self._wake.set()
