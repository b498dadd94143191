"""Revocation is durable; a restart and a standby build exactly the leader's ledger (item 7)."""

from collections.abc import Mapping
from typing import Any

from tests.unit.scheduler.builders import World, a40_node, gpu_node, manifest, world
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.domain import Pod
from vgpu.ports.cluster import ClusterError, Quota

GRANT_KEYS = {
    "hami.io/vgpu-node",
    "hami.io/vgpu-time",
    "hami.io/vgpu-devices-to-allocate",
    "hami.io/vgpu-devices-allocated",
    "vgpu.io/grant-signature",
}


def ledger(w: World) -> tuple[Any, ...]:
    """What must agree between replicas: every pod's cards, quota use, reservations."""
    snapshot = w.state.snapshot()
    reservations = tuple((r.pod, r.node, r.since, r.signature) for r in w.state.reservations())
    return snapshot.pods, snapshot.quotas, reservations


class FailingBindOnce(FakeCluster):
    """The first Binding of `victim` is refused outright (HTTP 4xx, not ambiguous)."""

    victim = "b"

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        if name == self.victim:
            self.victim = ""
            from vgpu.ports.cluster import Rejected

            raise Rejected("POST pods/binding: HTTP 422: node is being drained")
        super().bind(namespace, name, uid, node)


def workload(w: World) -> None:
    w.cluster.put_quota(Quota("team", "q", {"limits.nvidia.com/gpumem": "200000"}))
    w.filter(manifest("a", "team", gpu=1, gpumem=20000), "node1", "node2")
    assert w.service.bind("team", "a", "uid-a", "node1") == ""
    w.cluster.release_node_lock("node1", "team", "a")  # as the device plugin does
    w.filter(manifest("b", "team", gpu=2, gpumem=10000), "node1", "node2")
    assert "node is being drained" in w.service.bind("team", "b", "uid-b", "node1")
    w.filter(manifest("c", gpu=1, gpumem=5000), "node1", "node2")  # stays reserved
    w.filter(manifest("d", gpu=1, gpumem=5000), "node1", "node2")
    w.clock.now += 400  # d's and c's reservations expire ...
    w.runtime.sweep_now()
    w.filter(manifest("e", gpu=4, gpumem=1000), "node1", "node2")  # ... e is new


def test_a_failed_bind_takes_the_grant_off_the_pod() -> None:
    w = world(a40_node("node1"), cluster=FailingBindOnce())
    w.filter(manifest("b", gpu=1, gpumem=1000), "node1")
    assert "node is being drained" in w.service.bind("default", "b", "uid-b", "node1")
    assert not GRANT_KEYS & w.pod_annotations("b").keys()
    pod = w.cluster.get_pod("default", "b")
    assert pod is not None and "hami.io/vgpu-node" not in pod.labels


def test_a_restart_rebuilds_exactly_the_running_ledger() -> None:
    w = world(a40_node("node1"), gpu_node("node2"), cluster=FailingBindOnce())
    workload(w)
    restarted = world(cluster=w.cluster)
    restarted.clock.now = w.clock.now
    assert ledger(restarted) == ledger(w)
    assert [p for p, _, _ in ledger(w)[0]] == ["default/e", "team/a"]


def test_a_standby_following_the_same_events_agrees_with_the_leader() -> None:
    cluster = FailingBindOnce()
    standby = world(cluster=cluster, leader=False)
    w = world(a40_node("node1"), gpu_node("node2"), cluster=cluster)
    standby.clock.now = w.clock.now
    w.filter(manifest("x", gpu=1, gpumem=1000), "node1")
    assert ledger(standby) == ledger(w)
    workload(w)
    standby.clock.now = w.clock.now
    standby.runtime.sweep_now()
    assert ledger(standby) == ledger(w)
    assert cluster.events and all(e[1] != "standby" for e in cluster.events)


class ClearsFailTwice(FakeCluster):
    """Patches that remove a grant fail twice (an API outage), then go through."""

    failures = 2

    def patch_pod_annotations(
        self,
        namespace: str,
        name: str,
        annotations: Mapping[str, str | None],
        labels: Mapping[str, str | None] | None = None,
        resource_version: str | None = None,
    ) -> Pod:
        if self.failures and None in annotations.values():
            self.failures -= 1
            raise ClusterError("PATCH pod: HTTP 503: etcd leader changed")
        return super().patch_pod_annotations(namespace, name, annotations, labels, resource_version)


def test_a_failed_clear_stays_queued_and_the_sweeper_retries_it() -> None:
    w = world(a40_node("node1"), cluster=ClearsFailTwice(), reservation_timeout=60)
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    w.clock.now += 61
    w.runtime.sweep_now()  # expires; the clear and its retry both fail
    assert w.revoker.pending() == ["default/p"]
    assert "hami.io/vgpu-devices-allocated" in w.pod_annotations("p")
    w.cluster.patch_pod_annotations("default", "p", {"unrelated": "event"})
    assert w.state.ledger.pods() == []  # the in-memory guard holds meanwhile
    w.runtime.sweep_now()  # lands
    assert w.revoker.pending() == []
    assert not GRANT_KEYS & w.pod_annotations("p").keys()
    assert world(cluster=w.cluster).state.ledger.pods() == []  # nothing to resurrect


def test_a_clear_never_touches_a_pod_that_was_bound_or_granted_anew() -> None:
    w = world(a40_node("node1"), cluster=ClearsFailTwice(), reservation_timeout=60)
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    w.clock.now += 61
    w.runtime.sweep_now()  # the clear and its retry both fail: still queued
    assert w.revoker.pending() == ["default/p"]
    w.filter(manifest("p", gpu=1, gpumem=2000), "node1")  # scheduled again meanwhile
    fresh = w.pod_annotations("p")
    w.runtime.sweep_now()
    assert w.revoker.pending() == []
    assert w.pod_annotations("p") == fresh
