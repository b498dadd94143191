"""Taking and releasing HAMi's node lock `hami.io/mutex.lock` against the API
(docs/protocol.md#node-lock).

The lock is a node annotation `<RFC3339 time>,<namespace>,<pod>`. It is written with a JSON
merge patch that carries the node's `metadata.resourceVersion`, so two schedulers racing for
the same node cannot both win: the later write gets 409 Conflict, re-reads and decides again
(up to 5 tries, 100 ms doubling with jitter).

While another live pod holds the lock (its bind is between lock and Allocate), the caller
waits for it, as HAMi's bind does: it re-reads with a jittered backoff from 100 ms doubling to
1 s, for at most `conflict_wait_s` in all, and only then gives up with Conflict.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum

from vgpu.adapters.kubernetes.api import KubeApi, namespaced, object_path
from vgpu.adapters.kubernetes.backoff import Backoff
from vgpu.adapters.kubernetes.nodeupdate import ATTEMPTS, annotation_patch, tries
from vgpu.domain.errors import DomainError
from vgpu.domain.nodelock import DEFAULT_CLOCK_SKEW, NodeLock, lock_releasable, parse_node_lock
from vgpu.domain.vendor import NODE_LOCK_ANNOTATION
from vgpu.ports.cluster import Conflict, NodeUpdate, NotFound

log = logging.getLogger(__name__)

DEFAULT_CONFLICT_WAIT_S = 5.0


class LockVerdict(Enum):
    FREE = "free"  # no lock on the node
    OURS = "ours"  # the pod already holds it
    EXPIRED = "expired"  # older than the expiry
    FUTURE = "future-dated"  # dated beyond the clock skew allowance ahead: could never expire
    ORPHANED = "orphaned"  # its pod no longer exists
    MALFORMED = "malformed"  # unreadable value: nobody can prove ownership, so it is replaced
    HELD = "held"  # another live pod holds it

    @property
    def may_take(self) -> bool:
        return self is not LockVerdict.HELD


@dataclass(frozen=True, slots=True)
class LockState:
    verdict: LockVerdict
    lock: NodeLock | None = None


def judge_lock(
    value: str | None,
    namespace: str,
    pod: str,
    now: datetime,
    expiry: timedelta,
    owner_exists: Callable[[str, str], bool],
    skew: timedelta = DEFAULT_CLOCK_SKEW,
) -> LockState:
    """Whether `namespace/pod` may take a node whose lock annotation is `value`.

    `owner_exists` is asked only when the lock is neither ours, expired nor future-dated.
    """
    if value is None:
        return LockState(LockVerdict.FREE)
    try:
        lock = parse_node_lock(value)
    except DomainError:
        return LockState(LockVerdict.MALFORMED)
    if lock.owned_by(namespace, pod):
        return LockState(LockVerdict.OURS, lock)
    if lock.expired(now, expiry):
        return LockState(LockVerdict.EXPIRED, lock)
    if lock.from_the_future(now, skew):
        return LockState(LockVerdict.FUTURE, lock)
    if lock.pod and not owner_exists(lock.namespace, lock.pod):
        return LockState(LockVerdict.ORPHANED, lock)
    return LockState(LockVerdict.HELD, lock)


class NodeLocker:
    """The lock protocol over the API; `clock`, `sleep` and `monotonic` are injectable for tests.

    `conflict_wait_s` bounds how long `lock` waits for another live pod's lock to go.
    """

    def __init__(
        self,
        api: KubeApi,
        clock: Callable[[], datetime],
        sleep: Callable[[float], None] = time.sleep,
        *,
        conflict_wait_s: float = DEFAULT_CONFLICT_WAIT_S,
        monotonic: Callable[[], float] = time.monotonic,
        skew: timedelta = DEFAULT_CLOCK_SKEW,
    ) -> None:
        if conflict_wait_s < 0:
            raise ValueError(f"conflict_wait_s must not be negative, got {conflict_wait_s}")
        self._api = api
        self._clock = clock
        self._sleep = sleep
        self._conflict_wait_s = conflict_wait_s
        self._monotonic = monotonic
        self._skew = skew

    def lock(
        self,
        node: str,
        namespace: str,
        pod: str,
        expiry: timedelta,
        also: NodeUpdate | None = None,
    ) -> dict[str, object]:
        """Take the lock; returns the patched node manifest, or the current one if already ours
        (and `also` has nothing to write).

        `also` adds annotations to the lock's own patch, computed from the same read of the
        node. Raises NotFound for a missing node, Conflict when another live pod still holds the
        lock after `conflict_wait_s`.
        """
        deadline = self._monotonic() + self._conflict_wait_s
        waits = Backoff(initial=0.1, factor=2.0, cap=1.0, jitter=0.2)
        while True:
            try:
                return self._try_lock(node, namespace, pod, expiry, also)
            except _Held as held:
                left = deadline - self._monotonic()
                if left <= 0:
                    raise Conflict(f"{held} (waited {self._conflict_wait_s:g}s)") from None
                delay = min(waits.next_delay(), left)
                log.debug("%s; retrying in %.2fs", held, delay)
                self._sleep(delay)

    def _try_lock(
        self, node: str, namespace: str, pod: str, expiry: timedelta, also: NodeUpdate | None
    ) -> dict[str, object]:
        """One attempt: take the lock (retrying a racing write), or raise _Held."""
        path = object_path("/api/v1/nodes", node)
        for delay in tries():
            manifest = self._api.get(path)
            meta = manifest.get("metadata") or {}
            annotations = meta.get("annotations") or {}
            held = annotations.get(NODE_LOCK_ANNOTATION)
            now = self._clock()
            state = judge_lock(held, namespace, pod, now, expiry, self._pod_exists, self._skew)
            if not state.verdict.may_take:
                assert state.lock is not None
                raise _Held(
                    f"node {node} is locked by pod {state.lock.namespace}/{state.lock.pod} "
                    f"since {state.lock.taken_at.isoformat()}"
                )
            extra = dict(also(annotations)) if also is not None else {}
            if state.verdict is LockVerdict.OURS and not extra:
                return manifest
            if state.verdict not in (LockVerdict.FREE, LockVerdict.OURS):
                log.info(
                    "node %s: replacing %s lock %r for pod %s/%s",
                    node,
                    state.verdict.value,
                    held,
                    namespace,
                    pod,
                )
            if state.verdict is not LockVerdict.OURS:
                extra[NODE_LOCK_ANNOTATION] = NodeLock(now, namespace, pod).encode()
            try:
                return self._api.merge_patch(path, annotation_patch(meta, extra))
            except Conflict:
                if delay is None:
                    break
                log.debug("node %s changed while locking; retrying in %.2fs", node, delay)
                self._sleep(delay)
        raise Conflict(
            f"node {node}: lock not taken after {ATTEMPTS} tries, the node kept changing"
        )

    def release(self, node: str, namespace: str, pod: str) -> dict[str, object] | None:
        """Remove the lock if `namespace/pod` holds it; returns the patched node, else None."""
        path = object_path("/api/v1/nodes", node)
        for delay in tries():
            try:
                manifest = self._api.get(path)
            except NotFound:
                return None
            meta = manifest.get("metadata") or {}
            held = (meta.get("annotations") or {}).get(NODE_LOCK_ANNOTATION)
            if held is None or not lock_releasable(held, namespace, pod):
                return None
            try:
                return self._api.merge_patch(
                    path, annotation_patch(meta, {NODE_LOCK_ANNOTATION: None})
                )
            except NotFound:
                return None
            except Conflict:
                if delay is None:
                    break
                self._sleep(delay)
        raise Conflict(
            f"node {node}: lock not released after {ATTEMPTS} tries, the node kept changing"
        )

    def _pod_exists(self, namespace: str, pod: str) -> bool:
        try:
            self._api.get(object_path(namespaced("pods", namespace), pod))
        except NotFound:
            return False
        return True


class _Held(Exception):
    """Another live pod holds the lock; the message says who and since when."""


