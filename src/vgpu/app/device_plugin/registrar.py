"""Publishes the node's GPUs in `hami.io/node-nvidia-register` for the scheduler.

Checked every `interval` seconds and at once after a health change; the node is patched only
when the annotation differs from what it should be (so a deleted or edited annotation comes
back). Failures are logged and retried after `retry` seconds.

In the same patch it keeps HAMi schedulers of every version content
(docs/protocol.md#node-handshake): it
answers a `Requesting_`/`Deleted_` handshake, or a changed register annotation, with
`Reported <time>`; and with topology scores on it publishes `hami.io/node-nvidia-score`.
"""

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime

from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.topology import TopologyScores
from vgpu.domain.codec import encode_node_devices
from vgpu.domain.errors import DomainError
from vgpu.domain.handshake import HANDSHAKE_ANNOTATION, plugin_should_report, reported_value
from vgpu.domain.topology import SCORE_ANNOTATION
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
        *,
        report_handshake: bool = True,
        topology: TopologyScores | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now().astimezone(),
    ) -> None:
        self._cluster = cluster
        self._gpus = gpus
        self._node = node
        self._vendor = vendor
        self._interval = interval_s
        self._retry = retry_s
        self._report_handshake = report_handshake
        self._topology = topology
        self._clock = clock
        self._wake = threading.Event()
        gpus.on_change(self._wake.set)

    def sync(self) -> bool:
        """Make the node's annotations match the GPUs; False (logged) when that failed."""
        key = self._vendor.register_annotation
        devices = self._gpus.registered_devices()
        wanted = encode_node_devices(devices)
        try:
            node = self._cluster.get_node(self._node)
            if node is None:
                log.error("cannot register GPUs: node %s not found in the cluster", self._node)
                return False
            scores = self._scores([d.uuid for d in devices])
            scores_ok = scores is not None or self._topology is None
            patch = self._changes(node.annotations, {key: wanted, SCORE_ANNOTATION: scores})
            if not patch:
                log.debug("node %s: %s is up to date", self._node, key)
                return scores_ok
            self._cluster.patch_node_annotations(self._node, patch)
        except (ClusterError, DomainError) as exc:
            log.error("cannot register GPUs on node %s: %s", self._node, exc)
            return False
        if key in patch:
            healthy = sum(d.healthy for d in devices)
            log.info(
                "registered %d GPU(s) (%d healthy) on node %s in %s: %s",
                len(devices),
                healthy,
                self._node,
                key,
                wanted,
            )
        return scores_ok

    def _changes(
        self, current: Mapping[str, str], wanted: Mapping[str, str | None]
    ) -> dict[str, str | None]:
        """The annotations to write: those not as `wanted` (None: leave alone), and a fresh
        `Reported` handshake with any change or when the scheduler's marker asks for one."""
        patch: dict[str, str | None] = {
            key: value
            for key, value in wanted.items()
            if value is not None and current.get(key) != value
        }
        if self._report_handshake and (
            patch or plugin_should_report(current.get(HANDSHAKE_ANNOTATION))
        ):
            patch[HANDSHAKE_ANNOTATION] = reported_value(self._clock())
        return patch

    def _scores(self, uuids: list[str]) -> str | None:
        return None if self._topology is None else self._topology.annotation(uuids)

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
