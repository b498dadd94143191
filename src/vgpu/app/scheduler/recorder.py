"""Writing the occupancy record (`vgpu.io/occupancy` on each Node): leader only.

- At bind, the pod's grant goes into the node lock's own patch (`for_bind`), before the Binding
  is created: a bind costs no extra API call.
- Bound pods counted but not recorded (HAMi's pods when vgpu starts, pods bound by another
  replica or before an upgrade) are recorded in the background (`record_now`), one patch per
  node for all of that node's pods; the same pass drops the entries of pods that have ended.

Each write reads the node and carries its resourceVersion, so it never overwrites an entry it
did not see; on a conflict it reads again and retries (the adapter's `update_node_annotations`
and `lock_node`). A grant the record has no room for is named in its overflow with its digest,
with a warning, and recorded here once room is made (see `occupancy.py` for what the overflow
decides).
"""

import logging
from collections.abc import Mapping

from vgpu.app.scheduler.fence import Fence
from vgpu.app.scheduler.occupancy import OccupancyBook
from vgpu.domain import Pod
from vgpu.domain.trust import (
    MAX_ENTRY_BYTES,
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
        self._dropped = 0

    def __call__(self, annotations: Mapping[str, str]) -> dict[str, str | None]:
        book, node = self._book, self._node
        text = annotations.get(OCCUPANCY_ANNOTATION)
        decoded = book.decoded(node, text)  # usually the text the follower read last
        ended = book.ended_on(node)
        change = updated_occupancy_record(text, self._add, ended, decoded=decoded)
        self._change = change
        self._dropped = len(ended)
        return {} if change.text is None else {OCCUPANCY_ANNOTATION: change.text}

    @property
    def wrote(self) -> bool:
        """Whether the write changed the record (False before it is computed)."""
        return self._change is not None and self._change.text is not None

    @property
    def recorded(self) -> int:
        """How many of the entries asked for the record holds after the write."""
        change = self._change
        if change is None or change.text is None:
            return 0
        return sum(1 for uid, entry in self._add.items() if change.entries.get(uid) == entry)

    def done(self) -> None:
        """The write landed: the book knows the record now; what had no room is reported."""
        change, node = self._change, self._node
        if change is None:
            return
        left_out = {uid: change.overflow[uid] for uid in change.left_out}
        if change.text is not None:
            record = OccupancyRecord(change.entries, overflow=change.overflow)
            self._book.read_record(node, change.text, record, left_out)
        elif left_out:
            self._book.left_out(node, left_out)
        if change.left_out:
            log.warning(
                "node %s: the occupancy record has no room for the grant(s) of pod(s) %s (it would "
                "be %d bytes, the limit is %d; one entry at most %d): they are named in its "
                "overflow with their grants' digests, and recorded once there is room",
                node,
                ", ".join(sorted(name.pod for name in left_out.values())),
                change.wanted_size,
                MAX_RECORD_BYTES,
                MAX_ENTRY_BYTES,
            )
        if change.unlisted:
            log.error(
                "node %s: the occupancy record cannot even name pod(s) %s in its overflow: a "
                "restart counts them from their annotations",
                node,
                ", ".join(sorted(self._pod(uid) for uid in change.unlisted)),
            )

    def report(self) -> None:
        """The log line of a background write that landed."""
        if self.wrote:
            log.info(
                "node %s: occupancy record written: %d bound pod(s) recorded, %d ended pod(s) "
                "dropped",
                self._node,
                self.recorded,
                self._dropped,
            )

    def _pod(self, uid: str) -> str:
        entry = self._add.get(uid)
        return entry.pod if entry is not None else f"uid {uid}"


class OccupancyRecorder:
    def __init__(self, cluster: ClusterPort, book: OccupancyBook, fence: Fence) -> None:
        self._cluster = cluster
        self._book = book
        self._fence = fence

    def for_bind(self, pod: Pod, node: str, claim: GrantClaim) -> RecordWrite:
        """The record write to fold into the node lock's patch of a bind of `pod`."""
        return RecordWrite(self._book, node, {pod.uid: OccupancyEntry.of(pod.key, claim)})

    def record_now(self) -> int:
        """On the leader, record every counted bound pod not recorded yet and drop the entries
        of pods that ended; returns how many nodes' records were written."""
        if not self._fence.leading:
            return 0
        written = 0
        for node, add in sorted(self._book.to_record().items()):
            write = RecordWrite(self._book, node, add)
            try:
                self._fence.check(f"occupancy record of node {node}")
                self._cluster.update_node_annotations(node, write)
            except ClusterError as exc:
                log.warning("node %s: occupancy record not written (%s); will retry", node, exc)
                continue
            write.done()
            write.report()
            written += 1 if write.wrote else 0
        return written
