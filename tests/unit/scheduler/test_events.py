"""EventQueue: Events leave the verb's thread, the queue is bounded, and every drop is counted."""

import threading

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.app.scheduler.events import MESSAGE_LIMIT, EventQueue, EventsCollector


class Sink:
    """A cluster's record_event that can fail, or hold every call until released."""

    def __init__(self, fail_first: int = 0) -> None:
        self.events: list[tuple[str, str, str, str, bool]] = []
        self.fail_first = fail_first
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()

    def record_event(
        self, namespace: str, pod: str, reason: str, message: str, *, warning: bool = False
    ) -> None:
        self.entered.set()
        assert self.release.wait(30), "the test never released the sink"
        if self.fail_first:
            self.fail_first -= 1
            raise ConnectionError("API server unreachable")
        self.events.append((namespace, pod, reason, message, warning))


def test_events_are_sent_in_order_by_the_worker() -> None:
    sink = Sink()
    queue = EventQueue(sink, lambda: True)
    queue.start()
    queue.record("default", "p", "FilteringSucceed", "node1 chosen")
    queue.record("default", "p", "BindingFailed", "lock held", warning=True)
    queue.stop(timeout=30)
    assert sink.events == [
        ("default", "p", "FilteringSucceed", "node1 chosen", False),
        ("default", "p", "BindingFailed", "lock held", True),
    ]
    assert queue.dropped() == {}


def test_record_never_waits_for_a_stuck_api_and_a_full_queue_drops_counted() -> None:
    sink = Sink()
    sink.release.clear()  # the API hangs on the first Event
    queue = EventQueue(sink, lambda: True, capacity=3)
    queue.start()
    queue.record("default", "p0", "R", "first")
    assert sink.entered.wait(30)  # the worker holds p0 in the hanging call
    for n in range(1, 6):
        queue.record("default", f"p{n}", "R", "more")  # returns at once, whatever the API does
    assert queue.pending() == 3
    assert queue.dropped() == {"full": 2}
    sink.release.set()
    queue.stop(timeout=30)
    assert [e[1] for e in sink.events] == ["p0", "p1", "p2", "p3"]


def test_a_follower_writes_no_events_and_counts_them() -> None:
    sink = Sink()
    queue = EventQueue(sink, lambda: False)
    queue.start()
    queue.record("default", "p", "R", "while following")
    queue.stop(timeout=30)
    assert sink.events == []
    assert queue.dropped() == {"follower": 1}


def test_the_worker_survives_a_raising_cluster(caplog: pytest.LogCaptureFixture) -> None:
    sink = Sink(fail_first=1)
    queue = EventQueue(sink, lambda: True)
    queue.start()
    queue.record("default", "a", "R", "lost")
    queue.record("default", "b", "R", "kept")
    queue.stop(timeout=30)
    assert [e[1] for e in sink.events] == ["b"]
    assert queue.dropped() == {"failed": 1}
    assert "event R for pod default/a not recorded: API server unreachable" in caplog.text


def test_stop_gives_up_on_a_hanging_api_and_counts_what_is_left() -> None:
    sink = Sink()
    sink.release.clear()
    queue = EventQueue(sink, lambda: True)
    queue.start()
    queue.record("default", "a", "R", "stuck")
    assert sink.entered.wait(30)
    queue.record("default", "b", "R", "never sent")
    queue.stop(timeout=0)
    assert queue.dropped() == {"shutdown": 1}
    queue.record("default", "c", "R", "after stop")
    assert queue.dropped() == {"shutdown": 2}
    sink.release.set()


def test_long_messages_are_cut_to_what_the_api_takes() -> None:
    sink = Sink()
    queue = EventQueue(sink, lambda: True)
    queue.start()
    queue.record("default", "p", "R", "x" * 5000)
    queue.stop(timeout=30)
    [(_, _, _, message, _)] = sink.events
    assert len(message) == MESSAGE_LIMIT and message.endswith("...")


def test_a_fake_cluster_receives_queued_events() -> None:
    cluster = FakeCluster()
    queue = EventQueue(cluster, lambda: True)
    queue.start()
    queue.record("default", "p", "FilteringFailed", "no node fits", warning=True)
    queue.stop(timeout=30)
    assert cluster.events == [("default", "p", "FilteringFailed", "no node fits", True)]


def test_drops_are_exported_as_a_counter() -> None:
    queue = EventQueue(Sink(), lambda: True, capacity=1)
    queue.record("default", "p", "R", "queued")
    queue.record("default", "p", "R", "dropped")  # not started: the queue stays full
    registry = CollectorRegistry()
    registry.register(EventsCollector(queue))
    samples = {
        s.labels["reason"]: s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
        if s.name == "vgpu_events_dropped_total"
    }
    assert samples == {"full": 1, "follower": 0, "failed": 0, "shutdown": 0}


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity must be at least 1, got 0"):
        EventQueue(Sink(), lambda: True, capacity=0)
