"""The adapter's cache follows the API by list + watch, over real HTTP to the emulator."""

import logging
from collections.abc import Callable

import pytest

from tests.e2e.k8s_emulator import RunningApiServer, node_manifest, pod_manifest, quota_manifest
from tests.e2e.kubernetes.conftest import Recorder, wait_until
from vgpu.adapters.kubernetes import KubernetesCluster

PODS = "/api/v1/namespaces/default/pods"


def test_first_list_is_heard_as_added_by_early_subscribers(
    k8s_api: RunningApiServer, connect: Callable[..., KubernetesCluster], recorder: Recorder
) -> None:
    k8s_api.create("/api/v1/nodes", node_manifest("gpu-1", annotations={"a": "1"}))
    k8s_api.create(PODS, pod_manifest("default", "p1", node_name="gpu-1"))
    k8s_api.create(
        "/api/v1/namespaces/team/resourcequotas",
        quota_manifest("team", "gpu", {"limits.nvidia.com/gpumem": "2000"}),
    )
    cluster = connect()
    cluster.subscribe(recorder)
    assert not cluster.synced
    cluster.start()

    assert cluster.wait_synced(10)
    assert recorder.wait_for(
        ("node", "ADDED", "gpu-1"), ("pod", "ADDED", "p1"), ("quota", "ADDED", "gpu")
    )
    node = cluster.get_node("gpu-1")
    assert node is not None and node.annotations == {"a": "1"}
    assert [p.name for p in cluster.list_pods("gpu-1")] == ["p1"]
    assert cluster.list_pods("gpu-2") == []
    [quota] = cluster.list_quotas()
    assert (quota.namespace, quota.name, dict(quota.hard)) == (
        "team",
        "gpu",
        {"limits.nvidia.com/gpumem": "2000"},
    )


def test_watch_sees_nodes_and_pods_added_modified_deleted(
    k8s_api: RunningApiServer, cluster: KubernetesCluster, recorder: Recorder
) -> None:
    k8s_api.create("/api/v1/nodes", node_manifest("gpu-1"))
    k8s_api.create(PODS, pod_manifest("default", "p1", limits={"nvidia.com/gpu": 1}))
    assert recorder.wait_for(("node", "ADDED", "gpu-1"), ("pod", "ADDED", "p1"))

    k8s_api.merge_patch("/api/v1/nodes/gpu-1", {"metadata": {"annotations": {"k": "v"}}})
    k8s_api.merge_patch(f"{PODS}/p1", {"status": {"phase": "Running"}})
    assert recorder.wait_for(("node", "MODIFIED", "gpu-1"), ("pod", "MODIFIED", "p1"))
    node, pod = cluster.get_node("gpu-1"), cluster.get_pod("default", "p1")
    assert node is not None and node.annotations["k"] == "v"
    assert pod is not None and pod.phase == "Running"
    assert pod.containers[0].limits == {"nvidia.com/gpu": 1}

    k8s_api.delete(f"{PODS}/p1")
    k8s_api.delete("/api/v1/nodes/gpu-1")
    assert recorder.wait_for(("node", "DELETED", "gpu-1"), ("pod", "DELETED", "p1"))
    assert cluster.get_node("gpu-1") is None
    assert cluster.get_pod("default", "p1") is None
    assert cluster.list_nodes() == [] and cluster.list_pods() == []


def test_a_dropped_watch_resumes_from_its_resource_version_without_relisting(
    k8s_api: RunningApiServer, cluster: KubernetesCluster, recorder: Recorder
) -> None:
    k8s_api.drop_watches()
    k8s_api.create("/api/v1/nodes", node_manifest("gpu-2"))

    assert recorder.wait_for(("node", "ADDED", "gpu-2"))
    assert cluster.informer_lists()["nodes"] == 1
    watches = k8s_api.requests("GET", "/api/v1/nodes")
    assert any("resourceVersion=" in str(r.url) and "watch=true" in str(r.url) for r in watches)


def test_410_gone_leads_to_a_relist_that_reports_what_the_watch_missed(
    k8s_api: RunningApiServer, cluster: KubernetesCluster, recorder: Recorder
) -> None:
    k8s_api.create("/api/v1/nodes", node_manifest("stays"))
    k8s_api.create("/api/v1/nodes", node_manifest("goes"))
    assert recorder.wait_for(("node", "ADDED", "stays"), ("node", "ADDED", "goes"))

    k8s_api.hold_watches()  # the next changes never reach the open watch
    k8s_api.delete("/api/v1/nodes/goes")
    k8s_api.merge_patch("/api/v1/nodes/stays", {"metadata": {"annotations": {"x": "1"}}})
    k8s_api.create("/api/v1/nodes", node_manifest("new"))
    k8s_api.expire_history()  # history compacted: resuming gets 410 Gone

    assert recorder.wait_for(
        ("node", "DELETED", "goes"), ("node", "MODIFIED", "stays"), ("node", "ADDED", "new")
    )
    assert cluster.informer_lists()["nodes"] == 2
    assert sorted(n.name for n in cluster.list_nodes()) == ["new", "stays"]
    stays = cluster.get_node("stays")
    assert stays is not None and stays.annotations == {"x": "1"}


def test_a_malformed_pod_is_logged_by_name_and_skipped_without_stopping_the_watch(
    k8s_api: RunningApiServer,
    cluster: KubernetesCluster,
    recorder: Recorder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    bad = pod_manifest("default", "broken")
    bad["spec"] = "not an object"
    k8s_api.create(PODS, bad)
    k8s_api.create(PODS, pod_manifest("default", "fine"))

    assert recorder.wait_for(("pod", "ADDED", "fine"))
    assert cluster.get_pod("default", "broken") is None
    assert any("default/broken" in r.getMessage() for r in caplog.records)


def test_a_handler_that_raises_does_not_stop_other_handlers(
    k8s_api: RunningApiServer, cluster: KubernetesCluster, recorder: Recorder
) -> None:
    def explode(_: object) -> None:
        raise RuntimeError("handler bug")

    cluster.subscribe(explode)
    k8s_api.create("/api/v1/nodes", node_manifest("a"))
    k8s_api.create("/api/v1/nodes", node_manifest("b"))
    assert recorder.wait_for(("node", "ADDED", "a"), ("node", "ADDED", "b"))


def test_unsubscribed_handlers_hear_nothing_more(
    k8s_api: RunningApiServer, cluster: KubernetesCluster, recorder: Recorder
) -> None:
    late = Recorder()
    unsubscribe = cluster.subscribe(late)
    k8s_api.create("/api/v1/nodes", node_manifest("a"))
    assert late.wait_for(("node", "ADDED", "a"))
    unsubscribe()
    k8s_api.create("/api/v1/nodes", node_manifest("b"))
    assert recorder.wait_for(("node", "ADDED", "b"))
    assert ("node", "ADDED", "b") not in late.seen()


def test_an_api_that_is_down_at_start_is_retried_until_it_answers(
    connect_to: Callable[[str], KubernetesCluster], free_port: int, recorder: Recorder
) -> None:
    cluster = connect_to(f"http://127.0.0.1:{free_port}")
    cluster.subscribe(recorder)
    cluster.start()
    assert not cluster.wait_synced(0.3)  # nothing listens yet

    with RunningApiServer(port=free_port) as late:
        late.create("/api/v1/nodes", node_manifest("gpu-1"))
        assert cluster.wait_synced(30)
        assert recorder.wait_for(("node", "ADDED", "gpu-1"))
        cluster.stop()


def test_reads_before_the_first_list_ask_the_api(
    k8s_api: RunningApiServer, connect: Callable[..., KubernetesCluster]
) -> None:
    k8s_api.create("/api/v1/nodes", node_manifest("gpu-1"))
    k8s_api.create(PODS, pod_manifest("default", "p1", node_name="gpu-1"))
    k8s_api.create(PODS, pod_manifest("default", "p2", node_name="gpu-2"))
    cluster = connect()  # never started

    assert [n.name for n in cluster.list_nodes()] == ["gpu-1"]
    assert cluster.get_node("nope") is None
    pod = cluster.get_pod("default", "p1")
    assert pod is not None and pod.node_name == "gpu-1"
    assert [p.name for p in cluster.list_pods("gpu-2")] == ["p2"]


def test_a_pod_field_selector_limits_the_cache_to_one_node(
    k8s_api: RunningApiServer, connect: Callable[..., KubernetesCluster], recorder: Recorder
) -> None:
    k8s_api.create(PODS, pod_manifest("default", "mine", node_name="gpu-1"))
    k8s_api.create(PODS, pod_manifest("default", "other", node_name="gpu-2"))
    cluster = connect(pod_field_selector="spec.nodeName=gpu-1", watch_quotas=False)
    cluster.subscribe(recorder)
    cluster.start()
    assert cluster.wait_synced(10)
    k8s_api.create(PODS, pod_manifest("default", "mine-too", node_name="gpu-1"))
    k8s_api.create(PODS, pod_manifest("default", "not-mine", node_name="gpu-3"))

    assert recorder.wait_for(("pod", "ADDED", "mine-too"))
    assert wait_until(lambda: len(cluster.list_pods()) == 2)
    assert sorted(p.name for p in cluster.list_pods()) == ["mine", "mine-too"]
