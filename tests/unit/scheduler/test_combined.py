"""Combined scores (HAMi #2264): filter lists every feasible node, bind places the cards."""

from tests.unit.scheduler.builders import gpu_node, manifest, world
from vgpu.domain.vendor import NODE_LOCK_ANNOTATION


def test_filter_lists_every_feasible_node_and_writes_nothing() -> None:
    w = world(gpu_node("a", cards=1), gpu_node("b", cards=1), combine_scores=True)
    result = w.filter(manifest("p", gpu=1, gpumem=1000), "a", "b")
    assert sorted(result.node_names or []) == ["a", "b"]
    assert w.pod_annotations("p") == {}
    assert w.state.ledger.pods() == []


def test_bind_places_the_cards_on_the_node_kube_scheduler_chose() -> None:
    w = world(gpu_node("a", cards=1), gpu_node("b", cards=1), combine_scores=True)
    w.filter(manifest("p", gpu=1, gpumem=1000, gpucores=20), "a", "b")
    assert w.service.bind("default", "p", "uid-p", "b") == ""
    notes = w.pod_annotations("p")
    assert notes["hami.io/vgpu-node"] == "b"
    assert notes["hami.io/vgpu-devices-allocated"] == "GPU-b-0,NVIDIA,1000,20:;"
    assert notes["hami.io/bind-phase"] == "allocating"
    assert w.cluster.bindings == [("default", "p", "b")]
    node = w.cluster.get_node("b")
    assert node is not None and NODE_LOCK_ANNOTATION in node.annotations


def test_bind_fails_when_the_node_filled_up_since_filter() -> None:
    w = world(gpu_node("a", cards=1), combine_scores=True)
    w.filter(manifest("p", gpu=1, gpumem=20000), "a")
    w.filter(manifest("q", gpu=1, gpumem=20000), "a")
    assert w.service.bind("default", "p", "uid-p", "a") == ""
    error = w.service.bind("default", "q", "uid-q", "a")
    assert "no longer fits on a" in error and "insufficient memory" in error
    assert w.cluster.bindings == [("default", "p", "a")]
    assert w.state.ledger.allocation("default/q") is None
