"""Bind: node lock, bind-phase/bind-time annotations, Binding; on failure undo and say why."""

from tests.unit.scheduler.builders import START, a40_node, manifest, world
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.domain import Usage
from vgpu.domain.vendor import NODE_LOCK_ANNOTATION
from vgpu.ports.cluster import ClusterError


def test_bind_locks_the_node_marks_the_pod_and_creates_the_binding() -> None:
    w = world(a40_node("node1"))
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    w.clock.now += 2
    assert w.service.bind("default", "p", "uid-p", "node1") == ""
    assert w.cluster.bindings == [("default", "p", "node1")]
    notes = w.pod_annotations("p")
    assert notes["hami.io/bind-phase"] == "allocating"
    assert notes["hami.io/bind-time"] == str(int(START) + 2)
    node = w.cluster.get_node("node1")
    assert node is not None
    assert node.annotations[NODE_LOCK_ANNOTATION].endswith(",default,p")
    assert w.state.reservation("default/p") is None  # bound: no longer a reservation
    assert w.state.ledger.allocation("default/p") is not None
    assert ("default", "p", "BindingSucceed") in [e[:3] for e in w.cluster.events]


def test_bind_fails_while_another_pod_holds_the_node_lock_and_releases_everything() -> None:
    w = world(a40_node("node1"))
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    w.add_pod(manifest("other"))
    from datetime import timedelta

    w.cluster.lock_node("node1", "default", "other", timedelta(minutes=5))
    error = w.service.bind("default", "p", "uid-p", "node1")
    assert "locked by default/other" in error
    assert "GPU reservation released" in error
    assert w.state.ledger.pods() == [] and w.state.quota.used("default") == Usage()
    assert w.cluster.bindings == []
    events = [e for e in w.cluster.events if e[2] == "BindingFailed"]
    assert events and "locked by default/other" in events[0][3]


class FailingBinding(FakeCluster):
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        raise ClusterError("pods/binding: 500 Internal Server Error")


def test_a_failed_binding_releases_the_node_lock_and_the_reservation() -> None:
    w = world(a40_node("node1"), cluster=FailingBinding())
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    error = w.service.bind("default", "p", "uid-p", "node1")
    assert "500 Internal Server Error" in error
    node = w.cluster.get_node("node1")
    assert node is not None and NODE_LOCK_ANNOTATION not in node.annotations
    assert w.state.ledger.pods() == []


def test_bind_of_an_unknown_pod_or_wrong_uid_fails_with_a_reason() -> None:
    w = world(a40_node("node1"))
    assert "pod default/ghost not found" in w.service.bind("default", "ghost", "", "node1")
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    assert "has uid uid-p" in w.service.bind("default", "p", "other-uid", "node1")


def test_bind_to_a_node_other_than_the_reserved_one_fails() -> None:
    w = world(a40_node("node1"), a40_node("node2"))
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    error = w.service.bind("default", "p", "uid-p", "node2")
    assert "no GPU reservation on node2 (its cards are reserved on node1)" in error


def test_a_pod_without_gpu_requests_is_bound_without_a_lock() -> None:
    w = world(a40_node("node1"))
    w.add_pod(manifest("web", cpu="1"))
    assert w.service.bind("default", "web", "uid-web", "node1") == ""
    node = w.cluster.get_node("node1")
    assert node is not None and NODE_LOCK_ANNOTATION not in node.annotations


def test_binding_twice_to_the_same_node_is_fine() -> None:
    w = world(a40_node("node1"))
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    assert w.service.bind("default", "p", "uid-p", "node1") == ""
    assert w.service.bind("default", "p", "uid-p", "node1") == ""
    assert "already bound to node1" in w.service.bind("default", "p", "uid-p", "node2")


def test_followers_do_not_bind() -> None:
    w = world(a40_node("node1"))
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    w.leader[0] = False
    assert "not the leader" in w.service.bind("default", "p", "uid-p", "node1")
