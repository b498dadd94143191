"""Counting bound pods: the grant their node's record names, else the one counted first, else
the one the counting rule finds on them now (see occupancy.py for why in that order).

Whatever a bound pod's annotations say later (a garbled signature, a removed or edited grant,
another node named), the grant counted for it stays until the pod ends; the first time its
annotations stop matching it, one warning names the pod and what changed. Init-container
release still shrinks the hold: it follows the pod's status, which tenants do not write.
"""

import logging

from vgpu.app.scheduler.occupancy import Held, OccupancyBook
from vgpu.app.scheduler.state import SchedulerState
from vgpu.domain import DomainError, Pod, PodGrants, Vendor
from vgpu.domain.errors import brief
from vgpu.domain.initrelease import hold_after_init
from vgpu.domain.mig import MIG_ALLOCATIONS_ANNOTATION
from vgpu.domain.trust import (
    GRANT_SIGNATURE_ANNOTATION,
    OCCUPANCY_ANNOTATION,
    Basis,
    GrantClaim,
    Occupancy,
    OccupancyEntry,
    OccupancyRecord,
    claim_grants,
)
from vgpu.domain.vendor import ASSIGNED_NODE_ANNOTATION, ASSIGNED_TIME_ANNOTATION

log = logging.getLogger(__name__)


class BoundPods:
    """Keeps the ledger's count of bound pods; the follower calls it under its own lock."""

    def __init__(self, state: SchedulerState, book: OccupancyBook, vendor: Vendor) -> None:
        self._state = state
        self._book = book
        self._vendor = vendor
        self._drifted: set[str] = set()  # pods whose annotations were found changed (logged)
        self._unreadable: set[str] = set()  # uids whose record entry does not read (logged)

    def count(self, pod: Pod, judged: Occupancy) -> bool:
        """Count a bound, unfinished pod's grant; False when it holds nothing we count."""
        book = self._book
        held = book.held(pod.key)
        if held is not None and held.uid != pod.uid:  # another pod under the same name
            book.ended(held.pod, held.uid)
            held = None
        counted = self._recorded(pod, held, judged)
        if counted is None and held is not None:
            counted = held.claim, held.grants
        if counted is None and judged.counts:
            assert judged.claim is not None and judged.grants is not None
            counted = judged.claim, judged.grants
        if counted is None:
            return False
        claim, grants = counted
        was_signed = held is not None and held.signed
        self._note_drift(pod, claim, judged, was_signed=was_signed)
        signed = judged.basis is Basis.SIGNED and judged.claim == claim
        init = pod.init_progress
        self._hold(Held(pod.key, pod.uid, pod.node_name, claim, grants, signed, init))
        return True

    def ended(self, pod: Pod) -> None:
        self._book.ended(pod.key, pod.uid)
        self._drifted.discard(pod.key)
        self._unreadable.discard(pod.uid)

    def record_changed(self, node: str, record: OccupancyRecord) -> None:
        """A node's record changed: its pods count what it names for them from now on."""
        for problem in record.problems:
            log.warning(
                "node %s: %s; that part is not used (the leader rewrites the record at its next "
                "write), the pods it would name are counted as first seen",
                node,
                problem,
            )
        for held in self._book.held_on(node):
            entry = record.entries.get(held.uid)
            if entry is None or entry.claim(held.uid, node) == held.claim:
                continue
            grants = self._decode(held.pod, node, held.uid, entry)
            if grants is not None:
                log.info("pod %s: counted as node %s's occupancy record names it", held.pod, node)
                claim = entry.claim(held.uid, node)
                # whether its annotations carry the recorded grant is known at its next event
                self._hold(Held(held.pod, held.uid, node, claim, grants, False, held.init))

    # internals ---------------------------------------------------------------------------------
    def _recorded(
        self, pod: Pod, held: Held | None, judged: Occupancy
    ) -> tuple[GrantClaim, PodGrants] | None:
        """The grant the pod's node's record names for it, decoded (once per grant); for a pod
        named in its overflow, the pod's own grant when its entry has the digest named there."""
        entry = self._book.recorded(pod.node_name, pod.uid)
        if entry is None:
            named = self._book.overflowed(pod.node_name, pod.uid)
            claim, grants = judged.claim, judged.grants
            if named is None or claim is None or grants is None:
                return None
            found = OccupancyEntry.of(pod.key, claim).digest == named.grant
            return (claim, grants) if found else None
        claim = entry.claim(pod.uid, pod.node_name)
        if held is not None and held.claim == claim:
            return claim, held.grants
        if judged.grants is not None and judged.claim == claim:
            return claim, judged.grants
        grants = self._decode(pod.key, pod.node_name, pod.uid, entry)
        return None if grants is None else (claim, grants)

    def _decode(self, pod: str, node: str, uid: str, entry: OccupancyEntry) -> PodGrants | None:
        try:
            grants = claim_grants(entry.claim(uid, node), self._vendor)
        except DomainError as exc:
            if uid not in self._unreadable:
                self._unreadable.add(uid)
                log.warning(
                    "node %s: %s entry of pod %s does not read (%s); not used",
                    node,
                    OCCUPANCY_ANNOTATION,
                    pod,
                    exc,
                )
            return None
        self._unreadable.discard(uid)
        return grants

    def _hold(self, held: Held) -> None:
        state = self._state
        after_init = hold_after_init(held.grants, held.init)
        namespace = held.pod.partition("/")[0]
        with state.locked():
            before = state.ledger.allocation(held.pod)
            problems = state.hold(
                held.pod,
                namespace,
                held.node,
                held.grants,
                held.init.count,
                strict=False,
                footprint=after_init,
            )
            state.bound(held.pod)
            self._book.hold(held)
        self._book.publish(held.node)  # a pod the node's overflow names may be known now
        if after_init is not None and before is not None and before.footprint != after_init:
            log.info("pod %s: init containers done, it now holds %s", held.pod, after_init)
        for problem in problems:
            log.warning("%s", problem)

    def _note_drift(
        self, pod: Pod, counted: GrantClaim, judged: Occupancy, *, was_signed: bool
    ) -> None:
        change = _drift(pod, counted, judged, was_signed, self._vendor.allocated_annotation)
        if not change:
            self._drifted.discard(pod.key)
        elif pod.key not in self._drifted:
            self._drifted.add(pod.key)
            log.warning(
                "pod %s on %s: its annotations no longer match the grant counted for it (%s); "
                "that grant (%s) stays counted until the pod ends",
                pod.key,
                pod.node_name,
                change,
                brief(counted.allocated, 200),  # a tenant's, for a pod it bound itself
            )


def _drift(
    pod: Pod, counted: GrantClaim, judged: Occupancy, was_signed: bool, allocated_key: str
) -> str:
    """What in the pod's annotations differs from the counted grant ('' when nothing does)."""
    now = judged.claim
    if now is None:
        return f"{allocated_key} or {ASSIGNED_NODE_ANNOTATION} removed"
    changed = [
        key
        for key, before, after in (
            (ASSIGNED_NODE_ANNOTATION, counted.node, now.node),
            (ASSIGNED_TIME_ANNOTATION, counted.assigned_time, now.assigned_time),
            (allocated_key, counted.allocated, now.allocated),
            (MIG_ALLOCATIONS_ANNOTATION, counted.mig_reservations, now.mig_reservations),
        )
        if before != after
    ]
    if changed:
        return f"{', '.join(changed)} changed"
    carries_signature = GRANT_SIGNATURE_ANNOTATION in pod.annotations
    if judged.basis is Basis.HOLDS_GPUS and (was_signed or carries_signature):
        return judged.verdict.problem  # the signature no longer verifies
    return ""
