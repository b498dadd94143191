"""The state follows the cluster: pods finishing or deleted free cards, a restart rebuilds."""

import logging

import pytest

from tests.unit.scheduler.builders import A40_UUIDS, a40_node, manifest, signed, world
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.domain import NVIDIA, ClusterNode, Usage, pod_from_manifest
from vgpu.domain.topology import SCORE_ANNOTATION, encode_pair_scores
from vgpu.ports.cluster import Quota


def running(name: str, uuid: str, memory: int, cores: int = 0, **kw: object) -> dict[str, object]:
    """A pod running on node1 with a grant this scheduler signed."""
    body = manifest(
        name,
        node="node1",
        phase="Running",
        annotations={
            "hami.io/vgpu-node": "node1",
            "hami.io/vgpu-devices-allocated": f"{uuid},NVIDIA,{memory},{cores}:;",
        },
        gpu=1,
        gpumem=memory,
        **kw,
    )
    return (
        signed(body)
        if "hami.io/vgpu-devices-allocated" in body["metadata"]["annotations"]
        else body
    )


def test_a_deleted_pod_frees_its_card() -> None:
    w = world(a40_node("node1"))
    w.filter(manifest("p", gpu=1, gpumem=46068), "node1")
    w.filter(manifest("q", gpu=1, gpumem=46068), "node1")
    assert w.filter(manifest("r", gpu=1, gpumem=46068), "node1").node_names is None
    w.cluster.delete_pod("default", "p")
    assert w.filter(manifest("r", gpu=1, gpumem=46068), "node1").node_names == ["node1"]


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_finished_pod_frees_its_card(phase: str) -> None:
    w = world(a40_node("node1"))
    w.add_pod(running("done", A40_UUIDS[0], 30000))
    assert w.usage("node1", A40_UUIDS[0]).memory == 30000
    w.add_pod({**running("done", A40_UUIDS[0], 30000), "status": {"phase": phase}})
    assert w.usage("node1", A40_UUIDS[0]) == Usage()


def test_a_restart_rebuilds_the_same_usage_and_quota_from_the_cluster() -> None:
    w = world(a40_node("node1"))
    w.cluster.put_quota(Quota("team", "q", {"limits.nvidia.com/gpumem": "50000"}))
    w.filter(manifest("a", "team", gpu=1, gpumem=20000, gpucores=30), "node1")
    w.filter(manifest("b", "team", gpu=2, gpumem=5000), "node1")
    w.add_pod(running("c", A40_UUIDS[1], 1000, 5))
    before = {u: w.usage("node1", u) for u in A40_UUIDS}
    quota_before = w.state.quota.used("team")
    restarted = world(cluster=w.cluster)  # a new process reading the same cluster
    assert {u: restarted.usage("node1", u) for u in A40_UUIDS} == before
    assert restarted.state.quota.used("team") == quota_before == Usage(3, 30000, 30)
    assert restarted.state.reservation("team/a") is not None  # filtered, not bound yet
    assert restarted.state.reservation("default/c") is None  # running
    blocked = restarted.filter(manifest("d", "team", gpu=1, gpumem=20001), "node1")
    assert "ResourceQuotaNotFit" in blocked.failed["node1"]


def test_a_malformed_grant_annotation_is_logged_and_the_pod_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = world(a40_node("node1"))
    bad = running("bad", A40_UUIDS[0], 1000)
    bad["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = "GPU-x,NVIDIA,lots,0:;"  # type: ignore[index]
    with caplog.at_level(logging.WARNING):
        w.add_pod(signed(bad))
    assert w.state.ledger.pods() == []
    assert "pod default/bad: its GPU grant is not counted" in caplog.text
    assert "'lots'" in caplog.text


def test_an_unbound_grant_with_an_unreadable_time_is_reserved_from_now() -> None:
    """`hami.io/vgpu-time` too long for a float must not leave the grant held but never
    reserved (it would then never expire)."""
    w = world(a40_node("node1"))
    body = manifest(
        "waiting",
        annotations={
            "hami.io/vgpu-node": "node1",
            "hami.io/vgpu-devices-allocated": f"{A40_UUIDS[0]},NVIDIA,1000,0:;",
            "hami.io/vgpu-time": "9" * 400,
        },
        gpu=1,
        gpumem=1000,
    )
    w.add_pod(signed(body))
    reservation = w.state.reservation("default/waiting")
    assert reservation is not None and reservation.node == "node1"
    assert w.usage("node1", A40_UUIDS[0]).memory == 1000


def test_a_grant_on_a_card_the_node_does_not_have_is_kept_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = world(a40_node("node1"))
    with caplog.at_level(logging.WARNING):
        w.add_pod(running("odd", "GPU-unknown", 1000))
    assert w.state.ledger.allocation("default/odd") is not None
    assert "card 'GPU-unknown' is not on node node1" in caplog.text


def test_a_node_losing_its_register_annotation_leaves_the_ledger() -> None:
    w = world(a40_node("node1"))
    w.cluster.put_node(ClusterNode("node1"))
    assert w.state.ledger.nodes() == []
    w.cluster.put_node(a40_node("node1"))
    assert w.state.ledger.nodes() == ["node1"]
    w.cluster.delete_node("node1")
    assert w.state.ledger.nodes() == []


def test_quota_objects_update_and_delete_and_the_tightest_of_two_applies() -> None:
    w = world(a40_node("node1"))
    w.cluster.put_quota(Quota("ns", "wide", {"limits.nvidia.com/gpumem": "90000"}))
    w.cluster.put_quota(Quota("ns", "narrow", {"limits.nvidia.com/gpumem": "10000"}))
    assert w.state.quota.limits("ns").memory == 10000
    w.cluster.delete_quota("ns", "narrow")
    assert w.state.quota.limits("ns").memory == 90000
    w.cluster.put_quota(Quota("ns", "wide", {"limits.nvidia.com/gpucores": "50"}))
    assert w.state.quota.limits("ns").memory is None
    assert w.state.quota.limits("ns").cores == 50


def test_a_malformed_quota_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    w = world(a40_node("node1"))
    with caplog.at_level(logging.WARNING):
        w.cluster.put_quota(Quota("ns", "bad", {"limits.nvidia.com/gpumem": "plenty"}))
    assert w.state.quota.limits("ns").is_unlimited
    assert "ResourceQuota ns/bad ignored" in caplog.text


def test_events_that_arrive_before_the_initial_list_are_harmless() -> None:
    cluster = FakeCluster()
    cluster.put_node(a40_node("node1"))
    pod = pod_from_manifest(running("c", A40_UUIDS[0], 1000))
    cluster.put_pod(pod)
    w = world(cluster=cluster)
    w.runtime.sync_now()  # listing again changes nothing
    assert w.usage("node1", A40_UUIDS[0]) == Usage(1, 1000, 0)


def test_a_broken_register_annotation_never_crashes_the_follower() -> None:
    w = world()
    for text in ["", "nonsense", "[1,2]", '[{"id":"x","devmem":-5}]', "a,b:c"]:
        w.cluster.put_node(ClusterNode("n", {NVIDIA.register_annotation: text}))
    assert w.state.node_problem("n") is not None


def test_a_nodes_pair_scores_reach_the_ledger_and_a_malformed_one_is_a_node_problem() -> None:
    scores = {A40_UUIDS[0]: {A40_UUIDS[1]: 450}, A40_UUIDS[1]: {A40_UUIDS[0]: 450}}
    node = a40_node("node1")
    w = world()
    w.cluster.put_node(
        ClusterNode("node1", {**node.annotations, SCORE_ANNOTATION: encode_pair_scores(scores)})
    )
    assert w.state.ledger.view("node1").pair_scores == scores
    w.cluster.put_node(ClusterNode("node1", {**node.annotations, SCORE_ANNOTATION: "[1]"}))
    problem = w.state.node_problem("node1")
    assert problem is not None and SCORE_ANNOTATION in problem
    w.cluster.put_node(node)
    assert w.state.node_problem("node1") is None
    assert w.state.ledger.view("node1").pair_scores == {}
