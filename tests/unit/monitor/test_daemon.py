"""The monitor's tick: clean-up of stale directories, and what it logs about bad regions."""

import logging
import threading

import pytest

from tests.unit.monitor.regionbytes import two_gpu_spec, v1_bytes
from vgpu.adapters.fake.accounting import FakeAccounting
from vgpu.adapters.hamicore.layout import decode
from vgpu.app.monitor.daemon import MonitorDaemon
from vgpu.domain.pod import Pod
from vgpu.ports.accounting import RegionUnreadable
from vgpu.ports.cluster import ClusterError

NOW = 1_000_000.0
REGION = decode(v1_bytes(two_gpu_spec()), len(v1_bytes(two_gpu_spec())))


def _daemon(fake: FakeAccounting, pods: list[Pod], grace: float = 300) -> MonitorDaemon:
    return MonitorDaemon(
        fake,
        lambda: pods,
        interval=5,
        cleanup_grace=grace,
        priority_feedback=False,
        clock=lambda: NOW,
    )


def test_directories_of_pods_gone_longer_than_the_grace_are_removed() -> None:
    fake = FakeAccounting()
    kept = fake.add("live", "main", REGION, modified=NOW - 10_000)
    old = fake.add("gone", "main", REGION, modified=NOW - 301)
    fresh = fake.add("new", "main", modified=NOW - 299)  # pod may not be listed yet

    _daemon(fake, [Pod("ns", "p", uid="live")]).tick()

    assert fake.removed == [old]
    assert fake.list_dirs() == [kept, fresh]


def test_finished_pods_still_on_the_node_keep_their_directories() -> None:
    fake = FakeAccounting()
    fake.add("done", "main", REGION, modified=0)

    _daemon(fake, [Pod("ns", "p", uid="done", phase="Succeeded")]).tick()

    assert fake.removed == []


def test_nothing_is_removed_when_the_pods_cannot_be_listed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeAccounting()
    fake.add("gone", "main", REGION, modified=0)

    def failing() -> list[Pod]:
        raise ClusterError("connection refused")

    daemon = MonitorDaemon(
        fake, failing, interval=5, cleanup_grace=0, priority_feedback=False, clock=lambda: NOW
    )
    with caplog.at_level(logging.WARNING):
        daemon.tick()

    assert fake.removed == []
    assert "cannot list this node's pods (connection refused)" in caplog.text


def test_an_unreadable_region_is_logged_once_per_reason(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeAccounting()
    fake.add("uid", "main", RegionUnreadable("wrong magic 7 at offset 0"), modified=NOW)
    daemon = _daemon(fake, [Pod("ns", "p", uid="uid")])

    with caplog.at_level(logging.WARNING):
        daemon.tick()
        daemon.tick()

    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "skipping the region of /fake/containers/uid_main: wrong magic 7 at offset 0"
    ]


def test_a_failing_tick_does_not_end_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeAccounting()
    stop = threading.Event()
    calls = []

    def pods() -> list[Pod]:
        calls.append(1)
        if len(calls) == 2:
            stop.set()
        raise RuntimeError("boom")

    daemon = MonitorDaemon(fake, pods, interval=0, cleanup_grace=0, priority_feedback=False)
    fake.add("uid", "main", REGION)
    with caplog.at_level(logging.ERROR):
        daemon.run(stop)

    assert len(calls) == 2
    assert "monitor tick failed" in caplog.text
