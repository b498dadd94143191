"""Writes whose outcome is unclear are settled by reading the pod (issue 8, items 5 and 6)."""

import threading
from collections.abc import Mapping

import pytest

from tests.unit.scheduler.builders import A40_UUIDS, a40_node, manifest, world
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.app.preconditioned_patch import Outcome
from vgpu.app.scheduler.fence import Fence
from vgpu.app.scheduler.grants import PodWriter
from vgpu.app.scheduler.pod_locks import PodLocks
from vgpu.domain import NVIDIA, Pod
from vgpu.ports.cluster import ClusterError, Conflict


class BindCommitsThenTimesOut(FakeCluster):
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        super().bind(namespace, name, uid, node)
        raise ClusterError("POST pods/binding: read timed out")


class BindTimesOutUncommitted(FakeCluster):
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        raise ClusterError("POST pods/binding: connection reset by peer")


class NothingAnswers(BindTimesOutUncommitted):
    """The Binding times out and so does every live read after it."""

    def read_pod(self, namespace: str, name: str) -> Pod | None:
        raise ClusterError("GET pod: read timed out")


def test_a_binding_that_times_out_but_committed_counts_as_bound_and_keeps_its_cards() -> None:
    w = world(a40_node("node1"), cluster=BindCommitsThenTimesOut())
    w.filter(manifest("p", gpu=1, gpumem=46068), "node1")
    assert w.service.bind("default", "p", "uid-p", "node1") == ""
    assert w.state.ledger.allocation("default/p") is not None
    assert w.state.reservation("default/p") is None  # bound, not a reservation
    w.clock.now += 3600
    w.runtime.sweep_now()
    # the card is still taken: a second full-card pod is not placed on it twice
    w.filter(manifest("q", gpu=1, gpumem=46068), "node1")
    assert "BindingSucceed" in [e[2] for e in w.cluster.events]
    assert sum(w.usage("node1", u).memory for u in A40_UUIDS) == 2 * 46068
    assert all(w.usage("node1", u).memory <= 46068 for u in A40_UUIDS)


def test_a_binding_that_times_out_uncommitted_releases_the_cards() -> None:
    w = world(a40_node("node1"), cluster=BindTimesOutUncommitted())
    w.filter(manifest("p", gpu=1, gpumem=46068), "node1")
    error = w.service.bind("default", "p", "uid-p", "node1")
    assert "connection reset by peer" in error and "GPU reservation released" in error
    assert w.state.ledger.pods() == []
    assert "hami.io/vgpu-devices-allocated" not in w.pod_annotations("p")


def test_when_nothing_can_be_read_the_reservation_is_kept() -> None:
    w = world(a40_node("node1"), cluster=NothingAnswers(), reservation_timeout=60)
    w.filter(manifest("p", gpu=1, gpumem=46068), "node1")
    error = w.service.bind("default", "p", "uid-p", "node1")
    assert "outcome unknown" in error
    assert w.state.ledger.allocation("default/p") is not None
    reservation = w.state.reservation("default/p")
    assert reservation is not None and not reservation.binding  # the sweeper may settle it
    w.clock.now += 61
    assert w.runtime.sweep_now() == 1


class PatchCommitsThenTimesOut(FakeCluster):
    def patch_pod_annotations(
        self,
        namespace: str,
        name: str,
        annotations: Mapping[str, str | None],
        labels: Mapping[str, str | None] | None = None,
        resource_version: str | None = None,
    ) -> Pod:
        super().patch_pod_annotations(namespace, name, annotations, labels, resource_version)
        raise ClusterError("PATCH pod: HTTP 504: gateway timeout")


def test_a_filter_patch_that_committed_despite_a_timeout_is_a_placement() -> None:
    w = world(a40_node("node1"), cluster=PatchCommitsThenTimesOut())
    result = w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    assert result.node_names == ["node1"] and result.error == ""
    assert w.state.ledger.allocation("default/p") is not None


def test_a_patch_with_a_stale_resource_version_fails() -> None:
    cluster = FakeCluster()
    old = cluster.put_pod(Pod("default", "p", uid="u"))
    cluster.patch_pod_annotations("default", "p", {"a": "1"})
    with pytest.raises(Conflict):
        cluster.patch_pod_annotations(
            "default", "p", {"a": "2"}, resource_version=old.resource_version
        )
    pod = cluster.get_pod("default", "p")
    assert pod is not None and pod.annotations == {"a": "1"}


def _grant(node: str) -> dict[str, str | None]:
    return {
        "hami.io/vgpu-node": node,
        "hami.io/vgpu-devices-allocated": f"{A40_UUIDS[0]},NVIDIA,1000,0:;",
    }


def test_a_superseded_placement_write_loses_to_the_newer_one() -> None:
    cluster = FakeCluster()
    read_by_old_leader = cluster.put_pod(Pod("default", "p", uid="u"))
    cluster.patch_pod_annotations("default", "p", _grant("node1"))  # the newer decision
    writer = PodWriter(cluster, NVIDIA, Fence(lambda: True))
    late = writer.patch(read_by_old_leader, _grant("node2"))
    assert late.outcome is Outcome.REFUSED
    pod = cluster.get_pod("default", "p")
    assert pod is not None and pod.annotations["hami.io/vgpu-node"] == "node1"


def test_a_patch_behind_an_unrelated_change_is_retried_once_and_lands() -> None:
    cluster = FakeCluster()
    read = cluster.put_pod(Pod("default", "p", uid="u"))
    cluster.patch_pod_annotations("default", "p", {"kubectl.kubernetes.io/note": "x"})
    writer = PodWriter(cluster, NVIDIA, Fence(lambda: True))
    assert writer.patch(read, _grant("node1")).outcome is Outcome.WRITTEN
    pod = cluster.get_pod("default", "p")
    assert pod is not None and pod.annotations["hami.io/vgpu-node"] == "node1"


def test_a_late_patch_on_a_pod_bound_meanwhile_is_not_retried() -> None:
    cluster = FakeCluster()
    read = cluster.put_pod(Pod("default", "p", uid="u"))
    cluster.bind("default", "p", "u", "node1")
    writer = PodWriter(cluster, NVIDIA, Fence(lambda: True))
    assert writer.patch(read, _grant("node2")).outcome is Outcome.REFUSED


def test_work_on_one_pod_waits_for_the_other_while_other_pods_go_ahead() -> None:
    locks = PodLocks()
    entered = {"default/p": threading.Event(), "default/q": threading.Event()}

    def work(pod: str) -> None:
        with locks.hold(pod):
            entered[pod].set()

    with locks.hold("default/p"):
        threads = [threading.Thread(target=work, args=(pod,)) for pod in entered]
        for thread in threads:
            thread.start()
        assert entered["default/q"].wait(5)
        assert not entered["default/p"].is_set()
    assert entered["default/p"].wait(5)
    for thread in threads:
        thread.join(5)
    assert len(locks) == 0  # a pod's lock is dropped when nobody holds it
