"""Start, sync, sweep and stop: the scheduler's life around the HTTP server.

On start the follower subscribes to cluster events, the adapter's caches fill, the grant
signing keys are loaded (created on first start), and the state is rebuilt from the cluster
(nodes, quotas, pods' grant annotations) before the replica reports ready. A sweeper releases
reservations whose pod was never bound within the timeout and, on the leader, takes their
grants off the pods (durably, retrying until the write lands). The key ring is re-read every
`key_refresh` seconds so that a rotation is picked up; when it changed, every pod is judged
again, so grants signed with a key this replica had not seen yet are counted from then on.
Chores (the node handshake, the occupancy recorder, late-grant revocation, the takeover report)
each run on their own thread every period once the state is synced; each decides itself
whether it must lead.
"""

import gc
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from vgpu.app.scheduler.follower import ClusterFollower
from vgpu.app.scheduler.handshake import NodeHandshake
from vgpu.app.scheduler.keys import GrantKeys
from vgpu.app.scheduler.revocation import Revoker
from vgpu.app.scheduler.state import SchedulerState
from vgpu.ports.cluster import ClusterPort

log = logging.getLogger(__name__)


class Lifecycle(Protocol):
    """What a caching cluster adapter offers beyond ClusterPort."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def wait_synced(self, timeout: float) -> bool: ...


class Leadership(Protocol):
    """A leader elector: only the leader schedules."""

    @property
    def is_leader(self) -> bool: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Chore:
    """Work repeated every `period` seconds on a thread named `name`, once the state is synced."""

    name: str
    period: float
    run: Callable[[], object]


class SchedulerRuntime:
    """Runs the follower, the initial sync and the reservation sweeper; answers readiness."""

    def __init__(
        self,
        cluster: ClusterPort,
        state: SchedulerState,
        follower: ClusterFollower,
        clock: Callable[[], float],
        reservation_timeout: float,
        sync_timeout: float,
        lifecycle: Lifecycle | None = None,
        leadership: Leadership | None = None,
        revoker: Revoker | None = None,
        keys: GrantKeys | None = None,
        key_refresh: float = 30.0,
        handshake: NodeHandshake | None = None,
        handshake_period: float = 15.0,
        chores: Sequence[Chore] = (),
    ) -> None:
        self._cluster = cluster
        self._state = state
        self._follower = follower
        self._clock = clock
        self._timeout = reservation_timeout
        self._sync_timeout = sync_timeout
        self._lifecycle = lifecycle
        self._leadership = leadership
        self._revoker = revoker
        self._keys = keys
        self._key_refresh = key_refresh
        self._chores = tuple(chores)
        self._handshake = handshake  # also follows node deletions (start subscribes it)
        if handshake is not None:
            self._chores += (Chore("vgpu-handshake", handshake_period, handshake.pass_now),)
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._unsubscribe: Callable[[], None] | None = None
        self._unsubscribe_handshake: Callable[[], None] | None = None

    def is_leader(self) -> bool:
        return self._leadership is None or self._leadership.is_leader

    def readiness(self) -> str:
        """'' when this replica can schedule, else the reason it cannot."""
        if not self._state.synced:
            return "cluster state not synced yet"
        if not self.is_leader():
            return "not the leader"
        return ""

    def start(self) -> None:
        self._unsubscribe = self._cluster.subscribe(self._follower.handle)
        if self._handshake is not None:
            self._unsubscribe_handshake = self._cluster.subscribe(self._handshake.handle)
        if self._lifecycle is not None:
            self._lifecycle.start()
        if self._leadership is not None:
            self._leadership.start()
        self._spawn("vgpu-sync", self._sync)
        self._spawn("vgpu-sweeper", self._sweep)
        if self._keys is not None:
            self._spawn("vgpu-keys", self._refresh_keys)
        for chore in self._chores:
            self._spawn(chore.name, partial(self._repeat, chore))

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=5)
        if self._leadership is not None:
            self._leadership.stop()
        if self._lifecycle is not None:
            self._lifecycle.stop()
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._unsubscribe_handshake is not None:
            self._unsubscribe_handshake()
        log.info("scheduler stopped: watches closed, leadership given up")

    def sync_now(self) -> None:
        """Load the keys, rebuild the state from the cluster and report ready (used at start)."""
        if self._keys is not None:
            self._keys.ensure()
        self._follower.rebuild(self._cluster)
        with self._state.locked():
            self._state.ledger.settle()
        # the rebuilt ledger lives as long as the process: keep full collections from walking it
        gc.collect()
        gc.freeze()
        self._state.mark_synced()

    def sweep_now(self) -> int:
        """Release reservations older than the timeout; returns how many.

        The leader also takes their grants off the pods, and retries earlier clears."""
        expired = self._state.expire(self._clock(), self._timeout)
        leading = self.is_leader()
        for reservation in expired:
            log.warning(
                "pod %s was not bound to %s within %.0f s: its GPU reservation is released",
                reservation.pod,
                reservation.node,
                self._timeout,
            )
            if leading and self._revoker is not None:
                namespace, _, name = reservation.pod.partition("/")
                self._revoker.revoke(namespace, name, reservation.signature)
        if leading and self._revoker is not None:
            self._revoker.retry()
        return len(expired)

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _sync(self) -> None:
        waited = 0.0
        while self._lifecycle is not None and not self._stopping.is_set():
            if self._lifecycle.wait_synced(self._sync_timeout):
                break
            waited += self._sync_timeout
            log.warning("cluster caches not synced after %.0f s; still waiting", waited)
        while not self._stopping.is_set():
            try:
                self.sync_now()
                return
            except Exception:
                log.exception("could not read the cluster; not ready, retrying in 5 s")
                self._stopping.wait(5.0)

    def refresh_keys_now(self) -> None:
        """Re-read the key ring; if it changed, judge every pod's grant again."""
        if self._keys is not None and self._keys.refresh() and self._state.synced:
            self._follower.rebuild(self._cluster)
        with self._state.locked():
            self._state.ledger.settle()

    def _refresh_keys(self) -> None:
        while not self._stopping.wait(self._key_refresh):
            try:
                self.refresh_keys_now()
            except Exception as exc:
                log.warning("grant keys not refreshed (the current ring stays): %s", exc)

    def _repeat(self, chore: Chore) -> None:
        while not self._stopping.wait(chore.period):
            if not self._state.synced:
                continue
            try:
                chore.run()
            except Exception:
                log.exception("%s failed; it runs again in %.1f s", chore.name, chore.period)

    def _sweep(self) -> None:
        period = max(min(self._timeout / 4, 5.0), 0.05)
        while not self._stopping.wait(period):
            try:
                self.sweep_now()
            except Exception:
                log.exception("reservation sweep failed")
