"""HAMi's node lock `hami.io/mutex.lock` over real HTTP, with resourceVersion preconditions."""

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from tests.e2e.k8s_emulator import RunningApiServer, node_manifest, pod_manifest
from tests.e2e.kubernetes.conftest import wait_until
from vgpu.adapters.kubernetes import KubernetesCluster
from vgpu.domain.nodelock import parse_node_lock
from vgpu.ports.cluster import Conflict, NotFound

LOCK = "hami.io/mutex.lock"
PODS = "/api/v1/namespaces/default/pods"
EXPIRY = timedelta(minutes=5)
SHORT_WAIT_S = 0.3  # how long the shared adapter waits for a held lock before Conflict


@pytest.fixture()
def cluster(connect: Callable[..., KubernetesCluster]) -> KubernetesCluster:
    """An adapter that gives up on a held lock after SHORT_WAIT_S, not the default 5 s."""
    adapter = connect(component="vgpu-test", lock_conflict_wait_s=SHORT_WAIT_S)
    adapter.start()
    assert adapter.wait_synced(10)
    return adapter


def _lock_value(k8s_api: RunningApiServer, node: str = "gpu-1") -> str | None:
    stored = k8s_api.get(f"/api/v1/nodes/{node}")
    assert stored is not None
    value: str | None = (stored["metadata"].get("annotations") or {}).get(LOCK)
    return value


@pytest.fixture()
def node(k8s_api: RunningApiServer) -> str:
    k8s_api.create("/api/v1/nodes", node_manifest("gpu-1"))
    for name in ("p1", "p2"):
        k8s_api.create(PODS, pod_manifest("default", name))
    return "gpu-1"


def test_a_free_lock_is_taken_with_hamis_value_and_a_resource_version_precondition(
    k8s_api: RunningApiServer, cluster: KubernetesCluster, node: str
) -> None:
    created = k8s_api.get("/api/v1/nodes/gpu-1")
    assert created is not None
    before = datetime.now(UTC).replace(microsecond=0)
    cluster.lock_node(node, "default", "p1", EXPIRY)

    value = _lock_value(k8s_api)
    assert value is not None
    lock = parse_node_lock(value)
    assert (lock.namespace, lock.pod) == ("default", "p1")
    assert before <= lock.taken_at <= datetime.now(UTC)
    [patch] = k8s_api.requests("PATCH", "/api/v1/nodes/gpu-1")
    assert patch.headers["Content-Type"] == "application/merge-patch+json"
    sent = json.loads(patch.body)  # as the client sent it, before the emulator stamped it
    assert sent["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_the_lock_is_refused_while_another_live_pod_holds_it(
    k8s_api: RunningApiServer, cluster: KubernetesCluster, node: str
) -> None:
    cluster.lock_node(node, "default", "p1", EXPIRY)
    held = _lock_value(k8s_api)

    with pytest.raises(Conflict, match=r"locked by pod default/p1 .*\(waited 0.3s\)"):
        cluster.lock_node(node, "default", "p2", EXPIRY)
    assert _lock_value(k8s_api) == held


def test_a_lock_released_while_the_second_caller_waits_is_taken_by_it(
    k8s_api: RunningApiServer, connect: Callable[..., KubernetesCluster], node: str
) -> None:
    first = connect(component="vgpu-first")
    second = connect(component="vgpu-second", lock_conflict_wait_s=30.0)
    first.lock_node(node, "default", "p1", EXPIRY)
    outcome: list[str] = []

    def take() -> None:
        try:
            second.lock_node(node, "default", "p2", EXPIRY)
            outcome.append("taken")
        except Conflict as exc:
            outcome.append(f"refused: {exc}")

    reads_before = len(k8s_api.requests("GET", "/api/v1/nodes/gpu-1"))
    waiter = threading.Thread(target=take)
    waiter.start()
    # the waiter has found the lock held and read the node again at least once: it is waiting
    assert wait_until(
        lambda: len(k8s_api.requests("GET", "/api/v1/nodes/gpu-1")) >= reads_before + 2
    )
    assert outcome == []
    first.release_node_lock(node, "default", "p1")
    waiter.join(30)

    assert outcome == ["taken"]
    value = _lock_value(k8s_api)
    assert value is not None and value.endswith(",default,p2")


def test_a_lock_held_by_the_same_pod_counts_as_taken(
    k8s_api: RunningApiServer, cluster: KubernetesCluster, node: str
) -> None:
    cluster.lock_node(node, "default", "p1", EXPIRY)
    cluster.lock_node(node, "default", "p1", EXPIRY)
    value = _lock_value(k8s_api)
    assert value is not None and value.endswith(",default,p1")


@pytest.mark.parametrize(
    ("held", "why"),
    [
        ("2020-01-01T00:00:00Z,default,p2", "expired although its pod lives"),
        (f"{datetime.now(UTC).isoformat(timespec='seconds')},default,gone", "its pod is gone"),
        ("2020-01-01T00:00:00Z", "legacy bare time, expired"),
        ("garbage", "unreadable"),
        ("2099-01-01T00:00:00Z,default,p2", "dated beyond the clock skew, its pod alive"),
    ],
    ids=["expired", "pod gone", "legacy", "unreadable", "future"],  # one lock holds today's date
)
def test_an_expired_orphaned_or_unreadable_lock_is_taken_over(
    k8s_api: RunningApiServer, cluster: KubernetesCluster, node: str, held: str, why: str
) -> None:
    k8s_api.merge_patch("/api/v1/nodes/gpu-1", {"metadata": {"annotations": {LOCK: held}}})

    cluster.lock_node(node, "default", "p1", EXPIRY)

    value = _lock_value(k8s_api)
    assert value is not None and value.endswith(",default,p1"), why


def test_only_the_owner_releases_the_lock(
    k8s_api: RunningApiServer, cluster: KubernetesCluster, node: str
) -> None:
    cluster.lock_node(node, "default", "p1", EXPIRY)

    cluster.release_node_lock(node, "default", "p2")
    assert _lock_value(k8s_api) is not None

    cluster.release_node_lock(node, "default", "p1")
    assert _lock_value(k8s_api) is None
    cluster.lock_node(node, "default", "p2", EXPIRY)  # free again
    cluster.release_node_lock("gpu-9", "default", "p2")  # a missing node is harmless


def test_locking_a_missing_node_raises_not_found(cluster: KubernetesCluster) -> None:
    with pytest.raises(NotFound, match="gpu-9"):
        cluster.lock_node("gpu-9", "default", "p1", EXPIRY)


def test_concurrent_lockers_on_one_node_have_exactly_one_winner(
    k8s_api: RunningApiServer, cluster: KubernetesCluster, node: str
) -> None:
    names = [f"racer-{i}" for i in range(8)]
    for name in names:
        k8s_api.create(PODS, pod_manifest("default", name))
    results: dict[str, str] = {}
    start = threading.Barrier(len(names))

    def race(pod: str) -> None:
        start.wait()
        try:
            cluster.lock_node(node, "default", pod, EXPIRY)
            results[pod] = "won"
        except Conflict:
            results[pod] = "lost"

    threads = [threading.Thread(target=race, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    winners = [pod for pod, result in results.items() if result == "won"]
    assert len(results) == len(names) and len(winners) == 1
    value = _lock_value(k8s_api)
    assert value is not None and value.endswith(f",default,{winners[0]}")
