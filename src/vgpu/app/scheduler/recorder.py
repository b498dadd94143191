"""Writing the occupancy record (`vgpu.io/occupancy` on each Node): leader only.

- At bind, the pod's grant goes into the node lock's own patch (`for_bind`), before the Binding
  is created: a bind costs no extra API call.
- Bound pods counted but not recorded (HAMi's pods when vgpu starts, pods bound by another
  replica or before an upgrade) are recorded in the background (`record_now`), one patch per
  node for all of that node's pods.

Each write reads the node and carries its resourceVersion, so it never overwrites an entry it
did not see; on a conflict it reads again and retries (the adapter's `update_node_annotations`
and `lock_node`). A write also drops the entries of pods that have ended. An entry that would
take a node's record past its bound is left out, with a warning: that pod is counted in memory
only, and a restart counts it from its annotations.
"""

import logging
from collections.abc import Mapping

from vgpu.app.scheduler.fence import Fence
from vgpu.app.scheduler.occupancy import OccupancyBook
from vgpu.domain import Pod
from vgpu.domain.trust import (
    MAX_RECORD_BYTES,
    OCCUPANCY_ANNOTATION,
    GrantClaim,
    OccupancyEntry,
    OccupancyRecord,
    OccupancyRecordChange,
    updated_occupancy_record,
)
from vgpu.ports.cluster import ClusterError, ClusterPort

log = logging.getLogger(__name__)


class RecordWrite:
    """One write of a node's record: a `NodeUpdate` (called with the node's annotations as read,
    perhaps once per try), and `done()` once the write has landed."""

    def __init__(self, book: OccupancyBook, node: str, add: Mapping[str, OccupancyEntry]) -> None:
        self._book = book
        self._node = node
        self._add = dict(add)
        self._change: OccupancyRecordChange | None = None

    def __call__(self, annotations: Mapping[str, str]) -> dict[str, str | None]:
        book, node = self._book, self._node
        text = annotations.get(OCCUPANCY_ANNOTATION)
        decoded = book.decoded(node, text)  # usually the text the follower read last
        change = updated_occupancy_record(text, self._add, book.ended_on(node), decoded=decoded)
        self._change = change
        return {} if change.text is None else {OCCUPANCY_ANNOTATION: change.text}

    @property
    def recorded(self) -> int:
        """How many of the entries asked for the write put in (0 before it is computed)."""
        change = self._change
        if change is None or change.text is None:
            return 0
        return len(self._add) - len(change.left_out)

    def done(self) -> None:
        """The write landed: the book knows the record now; what had no room is reported."""
        change = self._change
        if change is None:
            return
        if change.text is not None:
            self._book.read_record(self._node, change.text, OccupancyRecord(change.entries))
        if change.left_out:
            self._book.left_out(self._node, change.left_out)
            pods = ", ".join(sorted(self._add[uid].pod for uid in change.left_out))
            log.warning(
                "node %s: the occupancy record has no room for pod(s) %s (it would be %d bytes, "
                "the limit is %d): counted in memory only, a restart counts them from their "
                "annotations",
                self._node,
                pods,
                change.wanted_size,
                MAX_RECORD_BYTES,
            )


class OccupancyRecorder:
    def __init__(self, cluster: ClusterPort, book: OccupancyBook, fence: Fence) -> None:
        self._cluster = cluster
        self._book = book
        self._fence = fence

    def for_bind(self, pod: Pod, node: str, claim: GrantClaim) -> RecordWrite:
        """The record write to fold into the node lock's patch of a bind of `pod`."""
        return RecordWrite(self._book, node, {pod.uid: OccupancyEntry.of(pod.key, claim)})

    def record_now(self) -> int:
        """On the leader, record every counted bound pod not recorded yet; returns how many
        nodes' records were written."""
        if not self._fence.leading:
            return 0
        written = 0
        for node, add in sorted(self._book.unrecorded().items()):
            write = RecordWrite(self._book, node, add)
            try:
                self._fence.check(f"occupancy record of node {node}")
                self._cluster.update_node_annotations(node, write)
            except ClusterError as exc:
                log.warning("node %s: occupancy record not written (%s); will retry", node, exc)
                continue
            write.done()
            if write.recorded:
                written += 1
                log.info(
                    "node %s: %d bound pod(s) recorded in its occupancy record",
                    node,
                    write.recorded,
                )
        return written
