"""Durable revocation: a released reservation's grant is also taken off the pod in the API.

Otherwise the annotations stay, and a restart (or a standby) would count the grant again. The
clear is a patch with a resourceVersion precondition, made only while the pod is unbound and
still carries the revoked grant; a failed clear stays queued and `retry()` (the sweeper) tries
again. Until it lands, the in-memory revoked set (SchedulerState) keeps late events from
bringing the grant back.
"""

import logging
import threading
from dataclasses import dataclass

from vgpu.app.preconditioned_patch import Outcome
from vgpu.app.scheduler.grants import PodWriter, revoked_annotations
from vgpu.app.scheduler.trust import grant_identity
from vgpu.domain import Pod, Vendor
from vgpu.domain.trust import grant_claim

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Pending:
    namespace: str
    name: str
    identity: str  # the grant to clear (grant_identity); a newer grant is left alone


class Revoker:
    def __init__(self, writer: PodWriter, vendor: Vendor) -> None:
        self._writer = writer
        self._vendor = vendor
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()

    def revoke(self, namespace: str, name: str, identity: str) -> bool:
        """Take the grant named `identity` off the pod; True once done (or nothing to do)."""
        item = _Pending(namespace, name, identity)
        with self._lock:
            self._pending[f"{namespace}/{name}"] = item
        return self._settle(item)

    def retry(self) -> int:
        """Try every queued clear again; returns how many are still queued."""
        with self._lock:
            queued = list(self._pending.values())
        for item in queued:
            self._settle(item)
        return len(self.pending())

    def pending(self) -> list[str]:
        with self._lock:
            return sorted(self._pending)

    def _settle(self, item: _Pending) -> bool:
        key = f"{item.namespace}/{item.name}"
        done, why = self._clear(item)
        with self._lock:
            if done and self._pending.get(key) == item:
                del self._pending[key]
        if not done:
            log.warning("grant on pod %s not cleared yet (%s); will retry", key, why)
        return done

    def _clear(self, item: _Pending) -> tuple[bool, str]:
        current = self._writer.read(Pod(item.namespace, item.name))
        if not isinstance(current, Pod):
            return current is None, "" if current is None else current.detail
        claim = grant_claim(current.uid, current.annotations, self._vendor)
        if current.node_name or claim is None or grant_identity(claim) != item.identity:
            return True, ""  # bound, cleared, or granted anew: nothing of ours to take back
        annotations, labels = revoked_annotations(self._vendor)
        written = self._writer.patch(current, annotations, labels)
        if written.outcome is Outcome.WRITTEN:
            log.info("grant on pod %s cleared (%s)", f"{item.namespace}/{item.name}", item.identity)
            return True, ""
        return False, written.detail
