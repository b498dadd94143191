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
in the background (`recorder.py`). The book only keeps this knowledge; it is thread-safe.
"""

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from vgpu.domain import PodGrants
from vgpu.domain.initrelease import InitProgress
from vgpu.domain.trust import GrantClaim, OccupancyEntry, OccupancyRecord, decode_occupancy_record


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
    """Bound pods' counted grants, and the nodes' occupancy records as last read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: dict[str, str] = {}  # node -> its record's text as last read
        self._records: dict[str, OccupancyRecord] = {}  # node -> its record, decoded
        self._recorded_on: dict[str, str] = {}  # uid -> the node whose record names it
        self._held: dict[str, Held] = {}  # pod key -> its counted grant
        self._held_on: dict[str, set[str]] = {}  # node -> keys of the pods held there
        self._ended: dict[str, set[str]] = {}  # node -> uids of ended pods its record names
        self._left_out: dict[str, set[str]] = {}  # node -> uids its record had no room for

    # records -----------------------------------------------------------------------------------
    def read_record(
        self, node: str, text: str | None, decoded: OccupancyRecord | None = None
    ) -> OccupancyRecord | None:
        """Take a node's record as it is now (`decoded`: its text decoded, when the caller
        has it); returns it decoded if it changed, else None."""
        text = text or ""
        with self._lock:
            if self._texts.get(node, "") == text:
                return None
            record = decoded if decoded is not None else decode_occupancy_record(text)
            self._forget_record(node)
            if text:
                self._texts[node] = text
                self._records[node] = record
            for uid in record.entries:
                self._recorded_on[uid] = node
            if node in self._ended:  # ended pods the record still names
                self._ended[node] &= set(record.entries)
            self._left_out.pop(node, None)  # room may have been made: try them again
            return record

    def drop_node(self, node: str) -> None:
        """The node is gone: so is its record (its pods' counted grants stay until they end)."""
        with self._lock:
            self._forget_record(node)
            self._ended.pop(node, None)
            self._left_out.pop(node, None)

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

    def unrecorded(self) -> dict[str, dict[str, OccupancyEntry]]:
        """Per node, the held pods its record does not name yet (and has room for)."""
        with self._lock:
            found: dict[str, dict[str, OccupancyEntry]] = {}
            for node, keys in self._held_on.items():
                record = self._records[node].entries if node in self._records else {}
                skipped = self._left_out.get(node, set())
                for key in keys:
                    held = self._held[key]
                    if held.uid not in record and held.uid not in skipped:
                        found.setdefault(node, {})[held.uid] = held.entry
            return found

    def left_out(self, node: str, uids: Iterable[str]) -> None:
        """The record had no room for these: the background recorder stops trying until the
        record changes."""
        with self._lock:
            self._left_out.setdefault(node, set()).update(uids)

    def end_all_but(self, live: set[str]) -> None:
        """After reading every pod: recorded uids of pods that no longer exist have ended."""
        with self._lock:
            for uid, node in self._recorded_on.items():
                if uid not in live:
                    self._ended.setdefault(node, set()).add(uid)

    # held pods ---------------------------------------------------------------------------------
    def held(self, pod: str) -> Held | None:
        with self._lock:
            return self._held.get(pod)

    def hold(self, held: Held) -> None:
        with self._lock:
            self._unhold(held.pod)
            self._held[held.pod] = held
            self._held_on.setdefault(held.node, set()).add(held.pod)

    def held_on(self, node: str) -> list[Held]:
        with self._lock:
            return [self._held[key] for key in sorted(self._held_on.get(node, ()))]

    def ended(self, pod: str, uid: str) -> None:
        """The pod finished or was deleted: it holds nothing, and its record entry may go."""
        with self._lock:
            self._unhold(pod)
            node = self._recorded_on.get(uid)
            if node is not None:
                self._ended.setdefault(node, set()).add(uid)

    def unsigned(self) -> list[str]:
        """Keys of the bound pods counted without a grant signed with vgpu's key."""
        with self._lock:
            return sorted(key for key, held in self._held.items() if not held.signed)

    # internals ---------------------------------------------------------------------------------
    def _unhold(self, pod: str) -> None:
        held = self._held.pop(pod, None)
        if held is not None:
            keys = self._held_on.get(held.node)
            if keys is not None:
                keys.discard(pod)
                if not keys:
                    del self._held_on[held.node]

    def _forget_record(self, node: str) -> None:
        record = self._records.pop(node, None)
        for uid in record.entries if record is not None else ():
            if self._recorded_on.get(uid) == node:
                del self._recorded_on[uid]
        self._texts.pop(node, None)
