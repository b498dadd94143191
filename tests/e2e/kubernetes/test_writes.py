"""Writes over real HTTP: merge patches, the binding subresource, Events."""

from typing import Any

import pytest

from tests.e2e.k8s_emulator import RunningApiServer, node_manifest, pod_manifest
from tests.e2e.kubernetes.conftest import Recorder, wait_until
from vgpu.adapters.kubernetes import KubernetesCluster
from vgpu.ports.cluster import ClusterError, Conflict, NotFound

PODS = "/api/v1/namespaces/default/pods"


def _annotations(obj: dict[str, Any] | None) -> dict[str, str]:
    assert obj is not None
    found: dict[str, str] = obj["metadata"].get("annotations") or {}
    return found


def test_pod_annotations_and_labels_are_merge_patched_and_none_deletes(
    k8s_api: RunningApiServer, cluster: KubernetesCluster
) -> None:
    k8s_api.create(PODS, pod_manifest("default", "p1", annotations={"keep": "1", "drop": "2"}))
    # write-through refreshes a cached pod only (so a write racing a delete cannot revive it)
    assert wait_until(lambda: cluster.get_pod("default", "p1") is not None)

    pod = cluster.patch_pod_annotations(
        "default",
        "p1",
        {"hami.io/vgpu-node": "gpu-1", "drop": None},
        labels={"hami.io/vgpu-node": "gpu-1"},
    )

    assert pod.annotations == {"keep": "1", "hami.io/vgpu-node": "gpu-1"}
    assert pod.labels == {"hami.io/vgpu-node": "gpu-1"}
    stored = k8s_api.get(f"{PODS}/p1")
    assert _annotations(stored) == {"keep": "1", "hami.io/vgpu-node": "gpu-1"}
    assert stored is not None and stored["metadata"]["labels"] == {"hami.io/vgpu-node": "gpu-1"}
    [patch] = k8s_api.requests("PATCH", f"{PODS}/p1")
    assert patch.headers["Content-Type"] == "application/merge-patch+json"
    cached = cluster.get_pod("default", "p1")  # our own write is readable at once
    assert cached is not None and cached.annotations["hami.io/vgpu-node"] == "gpu-1"


def test_patching_a_missing_pod_raises_not_found(cluster: KubernetesCluster) -> None:
    with pytest.raises(NotFound, match="p-missing"):
        cluster.patch_pod_annotations("default", "p-missing", {"a": "b"})


def test_node_annotations_are_merge_patched(
    k8s_api: RunningApiServer, cluster: KubernetesCluster
) -> None:
    k8s_api.create("/api/v1/nodes", node_manifest("gpu-1", annotations={"old": "x"}))

    cluster.patch_node_annotations("gpu-1", {"hami.io/node-nvidia-register": "...", "old": None})

    assert _annotations(k8s_api.get("/api/v1/nodes/gpu-1")) == {
        "hami.io/node-nvidia-register": "..."
    }
    with pytest.raises(NotFound):
        cluster.patch_node_annotations("gpu-9", {"a": "b"})


def test_bind_creates_the_binding_and_the_pod_lands_on_the_node(
    k8s_api: RunningApiServer, cluster: KubernetesCluster, recorder: Recorder
) -> None:
    created = k8s_api.create(PODS, pod_manifest("default", "p1"))

    cluster.bind("default", "p1", created["metadata"]["uid"], "gpu-1")

    stored = k8s_api.get(f"{PODS}/p1")
    assert stored is not None and stored["spec"]["nodeName"] == "gpu-1"
    [post] = k8s_api.requests("POST", f"{PODS}/p1/binding")
    assert post.data["target"] == {"apiVersion": "v1", "kind": "Node", "name": "gpu-1"}
    assert wait_until(lambda: getattr(cluster.get_pod("default", "p1"), "node_name", "") == "gpu-1")


def test_bind_failures_carry_the_api_message(
    k8s_api: RunningApiServer, cluster: KubernetesCluster
) -> None:
    created = k8s_api.create(PODS, pod_manifest("default", "p1"))
    with pytest.raises(Conflict, match="UID in precondition"):
        cluster.bind("default", "p1", "not-the-uid", "gpu-1")
    cluster.bind("default", "p1", created["metadata"]["uid"], "gpu-1")
    with pytest.raises(ClusterError, match='already assigned to node "gpu-1"'):
        cluster.bind("default", "p1", "", "gpu-2")
    with pytest.raises(NotFound):
        cluster.bind("default", "ghost", "", "gpu-1")


def test_record_event_creates_a_core_v1_event_on_the_pod(
    k8s_api: RunningApiServer, cluster: KubernetesCluster
) -> None:
    created = k8s_api.create(PODS, pod_manifest("default", "p1"))
    assert wait_until(lambda: cluster.get_pod("default", "p1") is not None)

    cluster.record_event(
        "default", "p1", "FilteringFailed", "no node fits: gpu-1 too small", warning=True
    )
    cluster.record_event("default", "p1", "BindingSucceed", "bound to gpu-1")

    events = k8s_api.list_items("/api/v1/namespaces/default/events")
    assert [(e["reason"], e["type"], e["message"]) for e in events] == [
        ("FilteringFailed", "Warning", "no node fits: gpu-1 too small"),
        ("BindingSucceed", "Normal", "bound to gpu-1"),
    ]
    involved = events[0]["involvedObject"]
    assert involved == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "default",
        "name": "p1",
        "uid": created["metadata"]["uid"],
    }
    assert events[0]["source"] == {"component": "vgpu-test"}


def test_a_failing_event_write_is_logged_not_raised(
    k8s_api: RunningApiServer, cluster: KubernetesCluster, caplog: pytest.LogCaptureFixture
) -> None:
    k8s_api.emulator["post /api/v1/namespaces/default/events"] << 500

    cluster.record_event("default", "p1", "BindingFailed", "node gone")

    assert any(
        "BindingFailed" in r.getMessage() and "HTTP 500" in r.getMessage() for r in caplog.records
    )


def test_a_patch_with_a_stale_resource_version_gets_conflict_and_changes_nothing(
    k8s_api: RunningApiServer, cluster: KubernetesCluster
) -> None:
    created = k8s_api.create(PODS, pod_manifest("default", "p-rv"))
    stale = created["metadata"]["resourceVersion"]
    fresh = cluster.patch_pod_annotations("default", "p-rv", {"a": "1"}, resource_version=stale)
    with pytest.raises(Conflict, match="modified"):
        cluster.patch_pod_annotations("default", "p-rv", {"a": "2"}, resource_version=stale)
    assert _annotations(k8s_api.get(f"{PODS}/p-rv")) == {"a": "1"}
    cluster.patch_pod_annotations(
        "default", "p-rv", {"a": "3"}, resource_version=fresh.resource_version
    )
    assert _annotations(k8s_api.get(f"{PODS}/p-rv")) == {"a": "3"}


def test_read_pod_asks_the_api_not_the_cache(
    k8s_api: RunningApiServer, cluster: KubernetesCluster
) -> None:
    k8s_api.create(PODS, pod_manifest("default", "p-live"))
    before = len(k8s_api.requests("GET", f"{PODS}/p-live"))
    pod = cluster.read_pod("default", "p-live")
    assert pod is not None and pod.name == "p-live"
    assert len(k8s_api.requests("GET", f"{PODS}/p-live")) == before + 1
    assert cluster.read_pod("default", "p-gone") is None
