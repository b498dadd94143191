"""HAMi's node-lock cases (Project-HAMi/HAMi 4707fb0: nodelock TestReleaseNodeLock, nvidia
TestReleaseNodeLock) through `vgpu.ports.node_lock` over the in-memory cluster."""

from datetime import UTC, datetime, timedelta

import pytest

from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.domain import ClusterNode, Container, Pod, node_lock_value
from vgpu.domain.vendor import NODE_LOCK_ANNOTATION
from vgpu.ports.cluster import Conflict
from vgpu.ports.node_lock import lock_node_for_pod, release_node_lock_for_pod

NOW = datetime(2026, 7, 3, 7, 35, 10, tzinfo=UTC)
GPU = (Container("gpu-app", {"nvidia.com/gpu": 1}),)


def gpu_pod(name: str = "hami", namespace: str = "hami-ns") -> Pod:
    return Pod(namespace, name, uid=f"uid-{name}", containers=GPU)


def cluster_with(lock: str | None) -> FakeCluster:
    cluster = FakeCluster(clock=lambda: NOW)
    cluster.put_node(ClusterNode("worker", {} if lock is None else {NODE_LOCK_ANNOTATION: lock}))
    return cluster


def lock_on(cluster: FakeCluster) -> str | None:
    node = cluster.get_node("worker")
    assert node is not None
    return node.annotations.get(NODE_LOCK_ANNOTATION)


def test_releasing_on_a_node_that_does_not_exist_is_quiet() -> None:
    # HAMi returns the API's not-found error, which its callers only log: a node that is gone
    # holds no lock, so vgpu's release has nothing to do
    assert release_node_lock_for_pod(FakeCluster(), "node", gpu_pod()) is True


@pytest.mark.parametrize(
    ("lock", "left"),
    [
        (None, None),
        (node_lock_value(NOW, "namespace", "pod"), node_lock_value(NOW, "namespace", "pod")),
        (node_lock_value(NOW, "hami-ns", "hami"), None),
        ("2026-07-03T15:35:10+08:00", None),
    ],
    ids=["not locked", "another pod's lock", "its own lock", "legacy bare time"],
)
def test_release_removes_only_what_the_pod_may_remove(lock: str | None, left: str | None) -> None:
    cluster = cluster_with(lock)
    release_node_lock_for_pod(cluster, "worker", gpu_pod())
    assert lock_on(cluster) == left


def test_a_pod_without_gpu_containers_leaves_the_lock_alone() -> None:
    cluster = cluster_with("lock-values,default,pod-gpu")
    plain = Pod("default", "pod-no-gpu", containers=(Container("app"),))
    assert release_node_lock_for_pod(cluster, "worker", plain) is False
    assert lock_on(cluster) == "lock-values,default,pod-gpu"


def test_a_gpu_pod_releases_its_lock_even_with_an_unreadable_time() -> None:
    cluster = cluster_with("lock-values,default,pod-gpu")
    assert release_node_lock_for_pod(cluster, "worker", gpu_pod("pod-gpu", "default")) is True
    assert lock_on(cluster) is None


def test_locking_writes_the_pods_value_and_is_refused_while_another_pod_holds_it() -> None:
    cluster = cluster_with(None)
    cluster.put_pod(gpu_pod("other"))
    assert lock_node_for_pod(cluster, "worker", gpu_pod("other")) is True
    assert lock_on(cluster) == "2026-07-03T07:35:10Z,hami-ns,other"
    with pytest.raises(Conflict):
        lock_node_for_pod(cluster, "worker", gpu_pod(), expiry=timedelta(minutes=5))
    plain = Pod("hami-ns", "plain", containers=(Container("app"),))
    assert lock_node_for_pod(cluster, "worker", plain) is False
