"""Pod Events off the hot path: a bounded queue that one background thread sends from.

An Event is a courtesy to whoever runs `kubectl describe pod`; it must never slow a verb or
fail one. `record` only appends to the queue (or drops, counted, when it is full), and a single
worker thread writes the Events to the API. A replica that is not the leader writes nothing, so
the worker drops what it would send while following. Every drop is counted by reason in
`vgpu_events_dropped_total`.
"""

import logging
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 1000  # characters; the API refuses much longer Event messages

# why an Event was not written
FULL = "full"  # the queue was at capacity
FOLLOWER = "follower"  # this replica did not lead when the Event was due
FAILED = "failed"  # the API call raised
SHUTDOWN = "shutdown"  # still queued when `stop` gave up waiting


class EventSink(Protocol):
    """Where Events go: ClusterPort.record_event."""

    def record_event(
        self, namespace: str, pod: str, reason: str, message: str, *, warning: bool = False
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class _Event:
    namespace: str
    pod: str
    reason: str
    message: str
    warning: bool


class EventQueue:
    """Holds at most `capacity` Events for a worker thread (`start`) to send to `cluster`."""

    def __init__(
        self, cluster: EventSink, is_leader: Callable[[], bool], capacity: int = 1000
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._cluster = cluster
        self._is_leader = is_leader
        self._capacity = capacity
        self._pending: deque[_Event] = deque()
        self._changed = threading.Condition()
        self._closing = False
        self._abandoned = False
        self._dropped: Counter[str] = Counter()
        self._worker: threading.Thread | None = None

    def record(
        self, namespace: str, pod: str, reason: str, message: str, *, warning: bool = False
    ) -> None:
        """Queue an Event for the pod; never blocks, never raises."""
        if len(message) > MESSAGE_LIMIT:
            message = message[: MESSAGE_LIMIT - 3] + "..."
        event = _Event(namespace, pod, reason, message, warning)
        with self._changed:
            if self._closing or len(self._pending) >= self._capacity:
                self._drop(SHUTDOWN if self._closing else FULL, event)
                return
            self._pending.append(event)
            self._changed.notify()

    def dropped(self) -> dict[str, int]:
        """How many Events were not written, by reason."""
        with self._changed:
            return dict(self._dropped)

    def pending(self) -> int:
        with self._changed:
            return len(self._pending)

    def start(self) -> None:
        if self._worker is not None:
            return
        self._worker = threading.Thread(target=self._run, name="vgpu-events", daemon=True)
        self._worker.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Send what is queued, waiting at most `timeout` seconds; the rest is dropped."""
        with self._changed:
            self._closing = True
            self._changed.notify()
        if self._worker is not None:
            self._worker.join(timeout)
        with self._changed:
            self._abandoned = True
            left = len(self._pending)
            while self._pending:
                self._drop(SHUTDOWN, self._pending.popleft())
        if left:
            log.warning(
                "%d pod events not written: the API did not take them in %.0f s", left, timeout
            )

    def _run(self) -> None:
        while (event := self._next()) is not None:
            self._send(event)

    def _next(self) -> _Event | None:
        with self._changed:
            while not self._pending and not self._closing:
                self._changed.wait()
            if self._abandoned or not self._pending:
                return None
            return self._pending.popleft()

    def _send(self, event: _Event) -> None:
        try:
            if not self._is_leader():
                self._count(FOLLOWER)
                return
            self._cluster.record_event(
                event.namespace, event.pod, event.reason, event.message, warning=event.warning
            )
        except Exception as exc:  # an Event is a courtesy; the worker must outlive any failure
            self._count(FAILED)
            log.warning(
                "event %s for pod %s/%s not recorded: %s",
                event.reason,
                event.namespace,
                event.pod,
                exc,
            )

    def _count(self, reason: str) -> None:
        with self._changed:
            self._dropped[reason] += 1

    def _drop(self, reason: str, event: _Event) -> None:  # caller holds the lock
        self._dropped[reason] += 1
        log.debug(
            "event %s for pod %s/%s dropped: %s", event.reason, event.namespace, event.pod, reason
        )


class EventsCollector(Collector):
    """Exports the queue's drops as `vgpu_events_dropped_total{reason}`."""

    def __init__(self, events: EventQueue) -> None:
        self._events = events

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(
            "vgpu_events_dropped",
            "Pod Events not written, by reason (full, follower, failed, shutdown).",
            labels=["reason"],
        )
        dropped = self._events.dropped()
        for reason in (FULL, FOLLOWER, FAILED, SHUTDOWN):
            family.add_metric([reason], dropped.get(reason, 0))
        yield family
