"""The fake cluster's node lock: a future-dated lock is taken over; a held one is waited for."""

import threading
from datetime import UTC, datetime, timedelta

import pytest

from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.domain import ClusterNode, Pod
from vgpu.domain.nodelock import NodeLock
from vgpu.domain.vendor import NODE_LOCK_ANNOTATION
from vgpu.ports.cluster import Conflict

EXPIRY = timedelta(minutes=5)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _holder(cluster: FakeCluster) -> str:
    node = cluster.get_node("node-a")
    assert node is not None
    return node.annotations[NODE_LOCK_ANNOTATION]


def _cluster(fake: FakeCluster) -> FakeCluster:
    fake.put_node(ClusterNode("node-a"))
    fake.put_pod(Pod("default", "p1", uid="u1"))
    fake.put_pod(Pod("default", "p2", uid="u2"))
    return fake


@pytest.mark.parametrize(("ahead", "taken"), [(60, False), (61, True), (10**8, True)])
def test_a_lock_dated_beyond_the_clock_skew_is_taken_over(ahead: int, taken: bool) -> None:
    cluster = _cluster(FakeCluster(clock=lambda: NOW))
    stamp = NOW + timedelta(seconds=ahead)
    cluster.patch_node_annotations(
        "node-a", {NODE_LOCK_ANNOTATION: NodeLock(stamp, "default", "p1").encode()}
    )
    if taken:
        cluster.lock_node("node-a", "default", "p2", EXPIRY)
        assert _holder(cluster).endswith(",default,p2")
    else:
        with pytest.raises(Conflict, match="locked by default/p1"):
            cluster.lock_node("node-a", "default", "p2", EXPIRY)


class SignallingCluster(FakeCluster):
    """Sets `blocked` when lock_node finds the node held, just before it waits."""

    def __init__(self) -> None:
        super().__init__(lock_conflict_wait_s=60.0)
        self.blocked = threading.Event()

    def _lock_holder(
        self, node: str, namespace: str, pod: str, expiry: timedelta
    ) -> NodeLock | None:
        holder = super()._lock_holder(node, namespace, pod, expiry)
        if holder is not None:
            self.blocked.set()
        return holder


def test_a_lock_released_while_another_pod_waits_goes_to_that_pod() -> None:
    cluster = _cluster(SignallingCluster())
    cluster.lock_node("node-a", "default", "p1", EXPIRY)
    outcome: list[str] = []

    def take() -> None:
        try:
            cluster.lock_node("node-a", "default", "p2", EXPIRY)
            outcome.append("taken")
        except Conflict as exc:
            outcome.append(str(exc))

    waiter = threading.Thread(target=take)
    waiter.start()
    assert cluster.blocked.wait(10)  # p2 found the lock held and is waiting
    cluster.release_node_lock("node-a", "default", "p1")
    waiter.join(10)

    assert outcome == ["taken"]
    assert _holder(cluster).endswith(",default,p2")


def test_a_legacy_bare_time_lock_is_released_by_the_pod_that_allocates() -> None:
    cluster = _cluster(FakeCluster(clock=lambda: NOW))
    cluster.patch_node_annotations("node-a", {NODE_LOCK_ANNOTATION: "2026-01-01T00:00:00Z"})
    cluster.release_node_lock("node-a", "default", "p1")
    node = cluster.get_node("node-a")
    assert node is not None and NODE_LOCK_ANNOTATION not in node.annotations


def test_the_pods_own_lock_is_released_even_when_its_time_is_unreadable() -> None:
    cluster = _cluster(FakeCluster(clock=lambda: NOW))
    cluster.patch_node_annotations("node-a", {NODE_LOCK_ANNOTATION: "lock-values,default,p1"})
    cluster.release_node_lock("node-a", "default", "p2")
    assert _holder(cluster) == "lock-values,default,p1"
    cluster.release_node_lock("node-a", "default", "p1")
    node = cluster.get_node("node-a")
    assert node is not None and NODE_LOCK_ANNOTATION not in node.annotations
