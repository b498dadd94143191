"""The pods the kubelet's device checkpoint says hold this plugin's resource (see
`vgpu.domain.trust.kubelet_holdings` for how their slices are read), for the node ledger.

The checkpoint is read on every call (the adapter re-parses it only when the file changed) and
the holdings recomputed only when it returned new entries. An unreadable checkpoint is logged
once per distinct fault and counts nothing: the served record and the pods' trusted grants
still count, so the plugin keeps serving (refusing every Allocate on a node whose kubelet
changed its file format would stop all GPU work there).
"""

import logging
import threading
from collections.abc import Mapping, Sequence

from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.domain.pod import Pod
from vgpu.domain.trust import DeviceAssignment, KubeletHolding, holdings_by_pod
from vgpu.ports.kubelet import CheckpointUnreadable, KubeletCheckpointPort

log = logging.getLogger(__name__)


class KubeletHolders:
    """Thread-safe: the Allocate path and the keeper's loop both ask."""

    def __init__(self, checkpoint: KubeletCheckpointPort, gpus: GpuState, resource: str) -> None:
        self._checkpoint = checkpoint
        self._gpus = gpus
        self._resource = resource
        self._read: tuple[Sequence[DeviceAssignment], dict[str, KubeletHolding]] | None = None
        self._fault = ""
        self._guess_logged: set[str] = set()
        self._lock = threading.Lock()

    def holdings(self, live: Mapping[str, Pod]) -> dict[str, KubeletHolding]:
        """By pod uid, what the pods in `live` (uid to pod) hold by the checkpoint."""
        with self._lock:
            return self._live(self._all(), live)

    def _live(
        self, held: dict[str, KubeletHolding], live: Mapping[str, Pod]
    ) -> dict[str, KubeletHolding]:
        found = {uid: holding for uid, holding in held.items() if uid in live}
        for uid, holding in found.items():
            if holding.guessed and uid not in self._guess_logged:
                self._guess_logged.add(uid)
                log.warning(
                    "pod %s holds GPUs by the kubelet's checkpoint %s, counted conservatively: %s",
                    live[uid].key,
                    self._checkpoint.path,
                    "; ".join(holding.guessed),
                )
        return found

    def _all(self) -> dict[str, KubeletHolding]:
        try:
            assignments = self._checkpoint.assignments()
        except CheckpointUnreadable as exc:
            if str(exc) != self._fault:
                log.error(
                    "the kubelet's device checkpoint does not read (%s): pods that this plugin "
                    "did not serve are counted only by their trusted grants until it does",
                    exc,
                )
            self._fault = str(exc)
            return {}
        if self._fault:
            log.info("the kubelet's device checkpoint %s reads again", self._checkpoint.path)
            self._fault = ""
        if self._read is not None and self._read[0] is assignments:
            return self._read[1]
        cards = {uuid: card for uuid in self._gpus.uuids() if (card := self._gpus.card(uuid))}
        held = holdings_by_pod(assignments, self._resource, cards)
        self._read = (assignments, held)
        return held
