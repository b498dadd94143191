"""Late grants: an unbound pod's grant that the ledger cannot count without over-filling a card.

Two grants for one card can both reach the API: a deposed leader's grant PATCH, held up by the
network, may land after the new leader gave the card to another pod. The earlier grant (or the
bound one) keeps the card; the follower does not count the later one (every replica alike) and
hands it here. The leader then takes it off its pod (the `Revoker`: durable, only while the pod
is unbound and still carries that grant), logs it and records an Event `GrantRevoked`; a bind of
that pod fails meanwhile, since it holds no reservation. `settle` runs on a background thread
(a runtime chore, every half second), so the follower, on the watch thread, never calls the API.
"""

import logging
import threading
from dataclasses import dataclass

from vgpu.app.scheduler.fence import Fence
from vgpu.app.scheduler.pod_events import PodEvents
from vgpu.app.scheduler.revocation import Revoker
from vgpu.domain import Pod

log = logging.getLogger(__name__)

GRANT_REVOKED = "GrantRevoked"


@dataclass(frozen=True, slots=True)
class LateGrant:
    namespace: str
    name: str
    node: str
    identity: str  # trust.grant_identity of the grant to take off
    why: str


class LateGrants:
    """Late grants waiting for the leader to revoke them. Thread-safe."""

    def __init__(self, revoker: Revoker, events: PodEvents, fence: Fence) -> None:
        self._revoker = revoker
        self._events = events
        self._fence = fence
        self._queue: dict[str, LateGrant] = {}
        self._lock = threading.Lock()

    def found(self, pod: Pod, node: str, identity: str, why: str) -> None:
        """The follower did not count this grant of `pod`: revoke it once leading."""
        with self._lock:
            self._queue[pod.key] = LateGrant(pod.namespace, pod.name, node, identity, why)

    def forget(self, pod: str) -> None:
        """The pod is gone: nothing to revoke."""
        with self._lock:
            self._queue.pop(pod, None)

    def pending(self) -> list[str]:
        with self._lock:
            return sorted(self._queue)

    def settle(self) -> int:
        """On the leader, revoke every queued late grant; returns how many were taken on."""
        if not self._fence.leading:
            return 0
        with self._lock:
            queued, self._queue = list(self._queue.values()), {}
        for late in queued:
            key = f"{late.namespace}/{late.name}"
            message = (
                f"its GPU grant on {late.node} was written after the card had been given to "
                f"another pod ({late.why}); the earlier grant keeps the card, this one is taken "
                "off the pod and it will be scheduled again"
            )
            log.warning("pod %s: %s", key, message)
            self._events.record(late.namespace, late.name, GRANT_REVOKED, message, warning=True)
            self._revoker.revoke(late.namespace, late.name, late.identity)
        return len(queued)
