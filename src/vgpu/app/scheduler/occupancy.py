"""What the scheduler counts for bound pods, and what the nodes' occupancy records say.

A bound pod's grant, once counted, stays counted until the pod ends, whatever its annotations
say later (a tenant can edit its own pod). Which grant counts for a bound, unfinished pod:

1. the one its node's occupancy record (`vgpu.io/occupancy`, written only by the leader)
   holds for the pod's uid;
2. else the one this process counted first (`Held`);
3. else the one its annotations name now, if the counting rule counts it
   (`vgpu.domain.trust.occupancy`).

The record comes first so that the leader and a standby (or a restarted process, which has no
memory) count the same. The leader records every counted grant: at bind, in the node lock's
own patch, and for the others (pods placed by HAMi or another replica, or before the upgrade)
in the background (`recorder.py`). A grant the record has no room for is named in its
overflow with the digest of its entry: a process that finds the pod's annotations still carrying
that grant counts them as the record would; one that does not (its tenant edited them before
this process first counted the pod, after a restart say) cannot know the grant, so the node
takes no new grants while the overflow names such a pod (see `OccupancyBook`). The book keeps
this knowledge and closes and opens nodes in the state; it is thread-safe.
"""

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from vgpu.app.scheduler.state import SchedulerState
from vgpu.domain import PodGrants
from vgpu.domain.initrelease import InitProgress
from vgpu.domain.trust import (
    OCCUPANCY_ANNOTATION,
    GrantClaim,
    OccupancyEntry,
    OccupancyRecord,
    OverflowName,
    decode_occupancy_record,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Held:
    """A bound pod's counted grant, and what the ledger needs to count it again."""

    pod: str  # namespace/name
    uid: str
    node: str
    claim: GrantClaim
    grants: PodGrants
    signed: bool  # the pod's annotations carried this very grant, signed, when last seen
    init: InitProgress

    @property
    def entry(self) -> OccupancyEntry:
        return OccupancyEntry.of(self.pod, self.claim)


class OccupancyBook:
    """Bound pods' counted grants, and the nodes' occupancy records as last read.

    A node whose record names in its overflow a pod (counted, but with no grant in the record)
    whose grant this process cannot vouch for is closed to new grants in `state` for as long as
    it does. The process vouches for a grant whose entry has the digest the overflow names: one
    it counted for that pod (`Held`), or one it put in the overflow itself. An ended pod needs
    nobody's word. So a pod whose annotations still carry its counted grant closes nothing, on
    any replica or after a restart; one whose tenant edited them before a process first counted
    it closes the node on that process, which cannot know what the pod holds.

    `publish(node)` closes or opens the node as that stands now; the methods that change it
    call it, except `hold` (called under the state's lock): its caller calls it after."""

    def __init__(self, state: SchedulerState | None = None) -> None:
        self._state = state
        self._lock = threading.Lock()
        self._publishing = threading.Lock()  # one node closure at a time, in the book's order
        self._texts: dict[str, str] = {}  # node -> its record's text as last read
        self._records: dict[str, OccupancyRecord] = {}  # node -> its record, decoded
        self._recorded_on: dict[str, str] = {}  # uid -> the node whose record names it
        self._held: dict[str, Held] = {}  # pod key -> its counted grant
        self._keys: dict[str, str] = {}  # uid -> pod key, of the held pods
        self._held_on: dict[str, set[str]] = {}  # node -> keys of the pods held there
        self._ended: dict[str, set[str]] = {}  # node -> uids of ended pods its record names
        self._left_out: dict[str, set[str]] = {}  # node -> uids its record had no room for
        self._vouched: dict[str, str] = {}  # uid -> digest of the grant this process put in an
        # overflow (it knows that grant even before it sees the pod bound)
        self._closed: dict[str, tuple[str, ...]] = {}  # node -> the pods that closed it

    # records -----------------------------------------------------------------------------------
    def read_record(
        self,
        node: str,
        text: str | None,
        decoded: OccupancyRecord | None = None,
        left_out: Mapping[str, OverflowName] | None = None,
    ) -> OccupancyRecord | None:
        """Take a node's record as it is now (`decoded`: its text decoded, when the caller
        has it); returns it decoded if it changed, else None. `left_out`: the pods this
        process's write of that text put in its overflow (see `left_out`)."""
        text = text or ""
        record = None
        with self._lock:
            if self._texts.get(node, "") != text:
                record = decoded if decoded is not None else decode_occupancy_record(text)
                self._forget_record(node)
                if text:
                    self._texts[node] = text
                    self._records[node] = record
                for uid in (*record.entries, *record.overflow):
                    self._recorded_on[uid] = node
                if node in self._ended:  # ended pods the record still names
                    self._ended[node] &= record.entries.keys() | record.overflow.keys()
                self._left_out.pop(node, None)  # room may have been made: try them again
            self._vouch(node, left_out or {})
        if record is not None or left_out:
            self.publish(node)
        return record

    def left_out(self, node: str, names: Mapping[str, OverflowName]) -> None:
        """This process's write put these pods in the node's overflow (or found them there
        still), knowing their grants: it vouches for them, and the background recorder stops
        trying them until the record changes, then records them once there is room."""
        with self._lock:
            self._vouch(node, names)
        self.publish(node)

    def drop_node(self, node: str) -> None:
        """The node is gone: so is its record (its pods' counted grants stay until they end)."""
        with self._lock:
            self._forget_record(node)
            self._ended.pop(node, None)
            self._left_out.pop(node, None)
        self.publish(node)

    def recorded(self, node: str, uid: str) -> OccupancyEntry | None:
        with self._lock:
            record = self._records.get(node)
            return None if record is None else record.entries.get(uid)

    def decoded(self, node: str, text: str | None) -> OccupancyRecord | None:
        """The node's record decoded, if `text` is the text last read for it."""
        with self._lock:
            record = self._records.get(node)
            return record if record is not None and self._texts.get(node) == text else None

    def ended_on(self, node: str) -> frozenset[str]:
        """Uids in the node's record whose pods have ended: the next write drops them."""
        with self._lock:
            return frozenset(self._ended.get(node, ()))

    def to_record(self) -> dict[str, dict[str, OccupancyEntry]]:
        """Per node whose record needs a write: the held pods it has no entry for yet (and has
        room for), perhaps none when only ended pods' entries are to go. A pod the record names
        in its overflow is recorded only with the grant the overflow names (its digest): a
        process that counted another (the pod's edited annotations) does not know that one."""
        with self._lock:
            found: dict[str, dict[str, OccupancyEntry]] = {
                node: {} for node, uids in self._ended.items() if uids
            }
            for node, keys in self._held_on.items():
                record = self._records.get(node, _NO_RECORD)
                # a write that drops ended pods makes room: what had none is tried again
                skipped = set() if self._ended.get(node) else self._left_out.get(node, set())
                for key in keys:
                    held = self._held[key]
                    uid = held.uid
                    if uid in record.entries or uid in skipped:
                        continue
                    entry = held.entry
                    named = record.overflow.get(uid)
                    if named is not None and named.grant != entry.digest:
                        continue
                    found.setdefault(node, {})[uid] = entry
            return found

    def overflowed(self, node: str, uid: str) -> OverflowName | None:
        """How the node's record names the pod in its overflow, if it does."""
        with self._lock:
            return self._records.get(node, _NO_RECORD).overflow.get(uid)

    def end_all_but(self, live: set[str]) -> None:
        """After reading every pod: recorded uids of pods that no longer exist have ended."""
        with self._lock:
            nodes = set()
            for uid, node in self._recorded_on.items():
                if uid not in live:
                    self._ended.setdefault(node, set()).add(uid)
                    nodes.add(node)
        for node in sorted(nodes):
            self.publish(node)

    # held pods ---------------------------------------------------------------------------------
    def held(self, pod: str) -> Held | None:
        with self._lock:
            return self._held.get(pod)

    def hold(self, held: Held) -> None:
        """Count `held` (the caller then calls `publish(held.node)`, outside the state's lock)."""
        with self._lock:
            self._unhold(held.pod)
            self._held[held.pod] = held
            self._keys[held.uid] = held.pod
            self._held_on.setdefault(held.node, set()).add(held.pod)

    def held_on(self, node: str) -> list[Held]:
        with self._lock:
            return [self._held[key] for key in sorted(self._held_on.get(node, ()))]

    def ended(self, pod: str, uid: str) -> None:
        """The pod finished or was deleted: it holds nothing, and its record entry may go."""
        with self._lock:
            self._unhold(pod)
            self._vouched.pop(uid, None)
            node = self._recorded_on.get(uid)
            if node is not None:
                self._ended.setdefault(node, set()).add(uid)
        if node is not None:
            self.publish(node)

    def unsigned(self) -> list[str]:
        """Keys of the bound pods counted without a grant signed with vgpu's key."""
        with self._lock:
            return sorted(key for key, held in self._held.items() if not held.signed)

    # internals ---------------------------------------------------------------------------------
    def _unhold(self, pod: str) -> None:
        held = self._held.pop(pod, None)
        if held is not None:
            if self._keys.get(held.uid) == pod:
                del self._keys[held.uid]
            keys = self._held_on.get(held.node)
            if keys is not None:
                keys.discard(pod)
                if not keys:
                    del self._held_on[held.node]

    def _forget_record(self, node: str) -> None:
        record = self._records.pop(node, None)
        for uid in (*record.entries, *record.overflow) if record is not None else ():
            if self._recorded_on.get(uid) == node:
                del self._recorded_on[uid]
        self._texts.pop(node, None)

    def _vouch(self, node: str, names: Mapping[str, OverflowName]) -> None:
        for uid, name in names.items():
            self._vouched[uid] = name.grant
        if names:
            self._left_out.setdefault(node, set()).update(names)

    def _unknown(self, node: str) -> tuple[str, ...]:
        """The pods the node's overflow names whose grants this process cannot vouch for."""
        overflow = self._records.get(node, _NO_RECORD).overflow
        if not overflow:
            return ()
        ended = self._ended.get(node, set())
        return tuple(
            sorted(
                name.pod
                for uid, name in overflow.items()
                if uid not in ended and not self._vouches(uid, name.grant)
            )
        )

    def _vouches(self, uid: str, grant: str) -> bool:
        if not grant:
            return False
        key = self._keys.get(uid)
        return self._vouched.get(uid) == grant or (
            key is not None and self._held[key].entry.digest == grant
        )

    # publishing --------------------------------------------------------------------------------
    def publish(self, node: str) -> None:
        """Close the node to new grants while its overflow names a pod whose grant this process
        cannot vouch for, open it once none (call it outside the state's lock and the book's:
        the state's lock is taken before the book's elsewhere)."""
        if self._state is None:
            return
        with self._publishing:
            with self._lock:
                pods = self._unknown(node)
            if self._closed.get(node, ()) == pods:
                return
            if pods:
                problem = _closed_because(node, pods)
                self._closed[node] = pods
                log.warning("%s", problem)
            else:
                problem = None
                del self._closed[node]
                log.info("node %s: every pod its occupancy record counts is known again", node)
            self._state.close_node(node, problem)


_NO_RECORD = OccupancyRecord({})
_NAMED = 5  # pods named in a closed node's reason; the log of the write that left them out has all


def _closed_because(node: str, pods: tuple[str, ...]) -> str:
    named = ", ".join(pods[:_NAMED])
    if len(pods) > _NAMED:
        named += f" and {len(pods) - _NAMED} more"
    return (
        f"node {node}: its occupancy record ({OCCUPANCY_ANNOTATION}) could not keep the grants "
        f"of {len(pods)} counted pod(s) ({named}), and their annotations no longer carry them; "
        "it takes no new GPU grants until the leader records them or they end"
    )
