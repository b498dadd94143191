"""The extender verbs act on the cluster's copy of the pod, not on the caller's word (item 3)."""

from datetime import timedelta

from tests.unit.scheduler.builders import a40_node, manifest, world
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.ports.cluster import NodeUpdate


def test_filter_refuses_a_pod_the_cluster_does_not_know_and_records_no_event() -> None:
    w = world(a40_node("node1"))
    result = w.service.filter(manifest("invented", gpu=1), ["node1"], None)
    assert "pod default/invented not found" in result.error
    assert w.state.ledger.pods() == [] and w.cluster.events == []


def test_filter_refuses_a_uid_that_differs_from_the_cluster() -> None:
    w = world(a40_node("node1"))
    w.add_pod(manifest("p", gpu=1, gpumem=1000))
    result = w.service.filter(manifest("p", uid="other", gpu=1, gpumem=1000), ["node1"], None)
    assert "has uid uid-p" in result.error
    assert w.pod_annotations("p") == {} and w.cluster.events == []


def test_filter_refuses_a_bound_pod_and_leaves_its_grant_alone() -> None:
    w = world(a40_node("node1"))
    w.filter(manifest("p", gpu=1, gpumem=8000), "node1")
    assert w.service.bind("default", "p", "uid-p", "node1") == ""
    before = w.pod_annotations("p")
    shrunk = manifest("p", gpu=1, gpumem=1)  # the 8000 -> 1 MiB rewrite of the issue
    result = w.service.filter(shrunk, ["node1"], None)
    assert "already bound to node1" in result.error
    assert w.pod_annotations("p") == before
    assert w.state.ledger.allocation("default/p") is not None


def test_filter_refuses_a_pod_of_another_scheduler() -> None:
    w = world(a40_node("node1"))
    body = manifest("p", gpu=1)
    body["spec"]["schedulerName"] = "default-scheduler"
    w.add_pod(body)
    result = w.service.filter(body, ["node1"], None)
    assert "names scheduler 'default-scheduler', not 'vgpu-scheduler'" in result.error
    assert w.state.ledger.pods() == []


def test_filter_plans_from_the_cached_pod_not_the_body() -> None:
    w = world(a40_node("node1"))
    w.add_pod(manifest("p", gpu=1, gpumem=8000))
    w.service.filter(manifest("p", gpu=1, gpumem=1), ["node1"], None)
    assert ",NVIDIA,8000,0:;" in w.pod_annotations("p")["hami.io/vgpu-devices-allocated"]


def test_bind_refuses_another_namespace_pod_of_another_scheduler() -> None:
    w = world(a40_node("node1"))
    body = manifest("web", "other-team", cpu="1")
    body["spec"]["schedulerName"] = "default-scheduler"
    w.add_pod(body)
    error = w.service.bind("other-team", "web", "uid-web", "node1")
    assert "names scheduler 'default-scheduler'" in error
    assert w.cluster.bindings == [] and w.cluster.events == []


def test_bind_refuses_a_wrong_or_missing_uid() -> None:
    w = world(a40_node("node1"))
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    assert "has uid uid-p" in w.service.bind("default", "p", "", "node1")
    assert "has uid uid-p" in w.service.bind("default", "p", "forged", "node1")
    assert w.cluster.bindings == []


def test_bind_refuses_a_pod_that_is_not_pending() -> None:
    w = world(a40_node("node1"))
    w.add_pod(manifest("done", phase="Succeeded", cpu="1"))
    assert "is Succeeded, not Pending" in w.service.bind("default", "done", "uid-done", "node1")
    assert w.cluster.bindings == []


def test_a_follower_writes_nothing_not_even_events() -> None:
    w = world(a40_node("node1"))
    w.add_pod(manifest("p", gpu=1, gpumem=1000))
    w.leader[0] = False
    assert "not the leader" in w.service.filter(manifest("p", gpu=1), ["node1"], None).error
    assert "not the leader" in w.service.bind("default", "p", "uid-p", "node1")
    assert w.cluster.events == [] and w.cluster.bindings == []
    assert w.pod_annotations("p") == {}


class LosesLeadershipWhileLocking(FakeCluster):
    """The Lease lapses while the node lock is being taken."""

    leader: list[bool]

    def lock_node(
        self,
        node: str,
        namespace: str,
        pod: str,
        expiry: timedelta,
        also: NodeUpdate | None = None,
    ) -> None:
        super().lock_node(node, namespace, pod, expiry, also)
        self.leader[0] = False


def test_a_leader_that_lapses_mid_bind_writes_nothing_more() -> None:
    cluster = LosesLeadershipWhileLocking()
    w = world(a40_node("node1"), cluster=cluster)
    cluster.leader = w.leader
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    written = w.pod_annotations("p")
    error = w.service.bind("default", "p", "uid-p", "node1")
    assert "not the leader" in error
    assert w.cluster.bindings == []
    assert w.pod_annotations("p") == written  # no bind-phase mark, no revocation either
