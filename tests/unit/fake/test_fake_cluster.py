from datetime import UTC, datetime, timedelta

import pytest

from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.domain import ClusterNode, Pod
from vgpu.domain.vendor import NODE_LOCK_ANNOTATION
from vgpu.ports.cluster import Action, ClusterEvent, Conflict, Kind, NotFound

EXPIRY = timedelta(minutes=5)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cluster(clock: Clock) -> FakeCluster:
    fake = FakeCluster(clock=clock)
    fake.put_node(ClusterNode("node-a"))
    fake.put_pod(Pod("default", "p1", uid="u1"))
    fake.put_pod(Pod("default", "p2", uid="u2"))
    return fake


def test_every_write_gets_a_new_resource_version(cluster: FakeCluster) -> None:
    before = cluster.get_pod("default", "p1")
    after = cluster.patch_pod_annotations("default", "p1", {"a": "1"}, labels={"l": "x"})
    assert before is not None and int(after.resource_version) > int(before.resource_version)
    assert after.annotations == {"a": "1"} and after.labels == {"l": "x"}
    assert cluster.patch_pod_annotations("default", "p1", {"a": None}).annotations == {}


def test_subscribers_see_changes_until_they_unsubscribe(cluster: FakeCluster) -> None:
    seen: list[ClusterEvent] = []
    unsubscribe = cluster.subscribe(seen.append)
    cluster.patch_pod_annotations("default", "p1", {"a": "1"})
    cluster.delete_pod("default", "p1")
    unsubscribe()
    cluster.delete_pod("default", "p2")
    assert [(e.kind, e.action) for e in seen] == [
        (Kind.POD, Action.MODIFIED),
        (Kind.POD, Action.DELETED),
    ]


def test_lock_is_exclusive_between_live_pods(cluster: FakeCluster) -> None:
    cluster.lock_node("node-a", "default", "p1", EXPIRY)
    cluster.lock_node("node-a", "default", "p1", EXPIRY)  # the owner again: fine
    with pytest.raises(Conflict, match="locked by default/p1"):
        cluster.lock_node("node-a", "default", "p2", EXPIRY)
    cluster.release_node_lock("node-a", "default", "p2")  # not the owner: no effect
    node = cluster.get_node("node-a")
    assert node is not None and node.annotations[NODE_LOCK_ANNOTATION].endswith(",default,p1")
    cluster.release_node_lock("node-a", "default", "p1")
    cluster.lock_node("node-a", "default", "p2", EXPIRY)


def test_expired_lock_or_gone_owner_is_taken_over(cluster: FakeCluster, clock: Clock) -> None:
    cluster.lock_node("node-a", "default", "p1", EXPIRY)
    clock.now += timedelta(minutes=6)
    cluster.lock_node("node-a", "default", "p2", EXPIRY)
    cluster.delete_pod("default", "p2")
    cluster.lock_node("node-a", "default", "p1", EXPIRY)


def test_bind_sets_the_node_once(cluster: FakeCluster) -> None:
    cluster.bind("default", "p1", "u1", "node-a")
    pod = cluster.get_pod("default", "p1")
    assert pod is not None and pod.node_name == "node-a"
    with pytest.raises(Conflict):
        cluster.bind("default", "p1", "u1", "node-a")
    with pytest.raises(NotFound):
        cluster.bind("default", "ghost", "", "node-a")
    assert cluster.list_pods("node-a") == [pod]


def test_unreadable_lock_is_taken_over(cluster: FakeCluster) -> None:
    cluster.patch_node_annotations("node-a", {NODE_LOCK_ANNOTATION: "not a time"})
    cluster.lock_node("node-a", "default", "p1", EXPIRY)
    node = cluster.get_node("node-a")
    assert node is not None and node.annotations[NODE_LOCK_ANNOTATION].endswith(",default,p1")
