"""Prioritize scores every candidate 0..10 and writes nothing."""

from tests.unit.scheduler.builders import a40_node, gpu_node, manifest, world
from vgpu.domain import ClusterNode


def test_every_candidate_gets_a_score_and_unfit_nodes_get_zero() -> None:
    w = world(gpu_node("busy", cards=1), gpu_node("idle", cards=1), ClusterNode("cpu"))
    w.filter(manifest("first", gpu=1, gpumem=12000, gpucores=50), "busy")
    body = manifest("p", gpu=1, gpumem=1000, gpucores=10)
    result = w.service.prioritize(body, ["busy", "idle", "cpu"], None)
    scores = dict(result.scores)
    assert [host for host, _ in result.scores] == ["busy", "idle", "cpu"]
    assert all(0 <= s <= 10 for s in scores.values())
    assert scores["busy"] > scores["idle"] > 0  # binpack by default
    assert scores["cpu"] == 0
    assert w.state.ledger.allocation("default/p") is None
    assert w.cluster.get_pod("default", "p") is None


def test_spread_reverses_the_order() -> None:
    w = world(gpu_node("busy", cards=1), gpu_node("idle", cards=1), node_policy="spread")
    w.filter(manifest("first", gpu=1, gpumem=12000, gpucores=50), "busy")
    scores = dict(
        w.service.prioritize(manifest("p", gpu=1, gpumem=1000), ["busy", "idle"], None).scores
    )
    assert scores["idle"] > scores["busy"]


def test_a_pod_that_already_holds_a_reservation_is_not_scored_against_itself() -> None:
    w = world(a40_node("node1"))
    body = manifest("p", gpu=2, gpumem=46068)
    w.filter(body, "node1")
    assert dict(w.service.prioritize(body, ["node1"], None).scores)["node1"] > 0


def test_a_pod_without_gpu_requests_scores_zero_everywhere() -> None:
    w = world(a40_node("node1"))
    result = w.service.prioritize(manifest("web", cpu="1"), ["node1", "x"], None)
    assert result.scores == [("node1", 0), ("x", 0)]


def test_scores_rank_the_nodes_so_close_fullness_is_not_a_tie() -> None:
    # binpack: a is a little fuller than b, b than c; a linear 0..10 map of the fullness (0..3)
    # gave all three the same 1, and kube-scheduler would have drawn among them
    w = world(gpu_node("a", cards=1), gpu_node("b", cards=1), gpu_node("c", cards=1))
    for node, memory in (("a", 3000), ("b", 2000), ("c", 1000)):
        w.filter(manifest(f"on-{node}", gpu=1, gpumem=memory, gpucores=1), node)
    scores = dict(w.service.prioritize(manifest("p", gpu=1, gpumem=100), list("cba"), None).scores)
    assert scores == {"a": 10, "b": 9, "c": 8}
