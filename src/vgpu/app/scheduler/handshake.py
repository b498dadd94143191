"""The scheduler's side of `hami.io/node-handshake` (docs/protocol.md#node-handshake): a pass over
every node.

Each pass applies HAMi's health check for the configured HAMi version to every node
(`vgpu.domain.handshake.check_node`). The leader writes what that version writes
(`Requesting_<now>`, `Deleted_<now>`, or the key's removal); a standby only reads, so that both
keep the same ledger. A node judged unhealthy (its device plugin stopped reporting) has its
cards dropped from the ledger and filter replies name why; it comes back when a later pass
re-reads its cards, exactly when HAMi would (healthy and due for a refresh). What a pass
remembers of a node is forgotten as soon as the node is deleted (`handle`), as HAMi's
NodeDeleted does, so a node created again under its name starts clean.
"""

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from vgpu.app.scheduler.follower import ClusterFollower
from vgpu.app.scheduler.state import SchedulerState
from vgpu.domain import ClusterNode, Vendor
from vgpu.domain.handshake import HANDSHAKE_ANNOTATION, HamiVersion
from vgpu.domain.node_health import NodeHealthBook
from vgpu.ports.cluster import Action, ClusterError, ClusterEvent, ClusterPort, Kind

log = logging.getLogger(__name__)


class NodeHandshake:
    """Runs HAMi's per-node health pass; call `pass_now` every 15 s, and give it the cluster's
    events (`handle`) so that it forgets deleted nodes at once."""

    def __init__(
        self,
        cluster: ClusterPort,
        state: SchedulerState,
        follower: ClusterFollower,
        vendor: Vendor,
        version: HamiVersion,
        clock: Callable[[], datetime],
        is_leader: Callable[[], bool],
    ) -> None:
        self._cluster = cluster
        self._state = state
        self._follower = follower
        self._vendor = vendor
        self._version = version
        self._clock = clock
        self._is_leader = is_leader
        self._book = NodeHealthBook(version)  # HAMi's per-node bookkeeping; empty at start
        self._book_lock = threading.Lock()  # passes and the watch thread's deletions

    def pass_now(self) -> None:
        """Check every node once; a failed write is logged and retried on the next pass."""
        now = self._clock()
        leading = self._is_leader()
        nodes = self._cluster.list_nodes()
        for node in nodes:
            self._check(node, now, leading)
        with self._book_lock:
            self._book.keep_only(node.name for node in nodes)

    def handle(self, event: ClusterEvent) -> None:
        """Forget a deleted node's health state now rather than at the next pass."""
        if event.kind is Kind.NODE and event.action is Action.DELETED:
            with self._book_lock:
                self._book.node_deleted(event.obj.name)

    def _check(self, node: ClusterNode, now: datetime, leading: bool) -> None:
        register = node.annotations.get(self._vendor.register_annotation)
        value = node.annotations.get(HANDSHAKE_ANNOTATION)
        allocatable = _count(node.allocatable.get(self._vendor.count_resource))
        with self._book_lock:
            verdict = self._book.check(node.name, value, allocatable, now, register)
        if leading and verdict.patch:
            try:
                self._cluster.patch_node_annotations(node.name, verdict.patch)
            except ClusterError as exc:
                log.warning("node %s: handshake not written, retried next pass: %s", node.name, exc)
        if not verdict.healthy:
            self._drop(node, value, allocatable)
        elif verdict.refresh and self._state.restore_reported(node.name):
            log.info("node %s: its device plugin reports again; its GPUs are back", node.name)
            self._follower.reload_node(self._cluster, node.name)

    def _drop(self, node: ClusterNode, value: str | None, allocatable: int) -> None:
        problem = (
            f"node {node.name}: its device plugin stopped reporting "
            f"({HANDSHAKE_ANNOTATION}={value!r}, allocatable "
            f"{self._vendor.count_resource}={allocatable}, HAMi {self._version.value} rules)"
        )
        if self._state.unreported(node.name) is None:
            log.warning("%s; its GPUs are not offered until it reports again", problem)
        self._state.drop_unreported(node.name, problem)


def _count(text: str | None) -> int:
    """Kubelet's allocatable count; anything unreadable counts as none, as HAMi's does."""
    try:
        return max(int(text or 0), 0)
    except ValueError:
        return 0
