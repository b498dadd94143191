"""Keeps the served record to the pods still running, and says how many unsigned grants the
node still counts: the figure that tells when a takeover from HAMi can end.

At start and every `interval_s`: the node's pods are read; record entries of pods that ended
(finished, or gone from the API) are dropped; and the pods the node ledger counts are sorted
into signed grants (vgpu's scheduler signed them) and unsigned ones (HAMi's pods, or pods
placed with signing off). The unsigned count is logged whenever it changes, naming the pods:

    node gpu-node-1: 2 of 7 GPU pods counted here hold unsigned grants (default/a, ml/b): ...

A pod list that cannot be read drops nothing.
"""

import logging
import threading

from vgpu.app.device_plugin.keyring import KeyRingUnavailable
from vgpu.app.device_plugin.nodeledger import Holder, NodeLedger
from vgpu.app.device_plugin.served import ServedRecord
from vgpu.app.device_plugin.trust import NodeGrantTrust
from vgpu.ports.cluster import ClusterError, ClusterPort
from vgpu.ports.served import RecordError

log = logging.getLogger(__name__)


class OccupancyKeeper:
    def __init__(
        self,
        cluster: ClusterPort,
        node: str,
        ledger: NodeLedger,
        served: ServedRecord,
        trust: NodeGrantTrust,
        interval_s: float = 30.0,
    ) -> None:
        self._cluster = cluster
        self._node = node
        self._ledger = ledger
        self._served = served
        self._trust = trust
        self._interval = interval_s
        self._reported: tuple[str, ...] | None = None

    def check(self) -> list[str] | None:
        """One round; the pods counted with unsigned grants, None when it could not tell."""
        try:
            mark = self._served.mark()
            pods = self._cluster.list_pods(self._node)
        except ClusterError as exc:
            log.warning(
                "node %s: cannot read its pods (%s); the served record keeps every entry",
                self._node,
                exc,
            )
            return None
        try:
            self._served.prune({p.uid for p in pods if not p.is_finished}, mark)
            holders = self._ledger.holders(pods)
            unsigned = sorted(h.pod.key for h in holders if not self._signed(h))
        except (RecordError, KeyRingUnavailable) as exc:
            log.error("node %s: cannot count what its pods hold: %s", self._node, exc)
            return None
        self._report(unsigned, len(holders))
        return unsigned

    def run(self, stop: threading.Event) -> None:
        """A round at once (the record is read and what is counted logged at start), then one
        every `interval_s` until `stop` is set."""
        while True:
            try:
                self.check()
            except Exception:  # the loop must outlive a surprise; the next round tries again
                log.exception("node %s: occupancy check failed", self._node)
            if stop.wait(self._interval):
                return

    def _signed(self, holder: Holder) -> bool:
        return holder.signed if holder.signed is not None else self._trust.signed(holder.pod)

    def _report(self, unsigned: list[str], counted: int) -> None:
        if tuple(unsigned) == self._reported:
            return
        self._reported = tuple(unsigned)
        if unsigned:
            log.warning(
                "node %s: %d of %d GPU pods counted here hold unsigned grants (%s): leave "
                "takeover mode, or turn signing on, only once this is 0",
                self._node,
                len(unsigned),
                counted,
                ", ".join(unsigned),
            )
        else:
            log.info(
                "node %s: 0 unsigned grants counted (%d GPU pods here, all signed by vgpu's "
                "scheduler)",
                self._node,
                counted,
            )
