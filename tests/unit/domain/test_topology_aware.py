"""`topology-aware`: the cards with the best links for several, the least linked for one."""

import pytest

from tests.unit.domain.builders import card, container, pod
from vgpu.domain import (
    ClusterNode,
    CodecError,
    ContainerRequest,
    Ledger,
    NodeRejection,
    NodeView,
    Placement,
    PodPolicies,
    SchedulingConfig,
    Usage,
    card_order,
    decide,
    fit_pod,
    plan_pod,
)
from vgpu.domain.topology import SCORE_ANNOTATION, encode_pair_scores

TOPOLOGY = {"hami.io/gpu-scheduler-policy": "topology-aware"}


def symmetric(pairs: dict[tuple[int, int], int], cards: int) -> dict[str, dict[str, int]]:
    """Pair scores for GPU-0..GPU-<cards-1>; pairs not listed score 20 (same CPU, no NVLink)."""
    scores: dict[str, dict[str, int]] = {f"GPU-{i}": {} for i in range(cards)}
    for a in range(cards):
        for b in range(cards):
            if a != b:
                score = pairs.get((min(a, b), max(a, b)), 20)
                scores[f"GPU-{a}"][f"GPU-{b}"] = score
    return scores


def four_cards() -> NodeView:
    """0-3 joined by 12 NVLinks, 1-2 by 4, the rest PCIe only."""
    scores = symmetric({(0, 3): 1250, (1, 2): 450}, 4)
    devices = tuple(card(f"GPU-{i}", i) for i in range(4))
    return NodeView("n", devices, {}, pair_scores=scores)


def eight_cards(busy: tuple[int, ...] = ()) -> NodeView:
    """Two NVLink islands, 0-3 and 4-7 (2 links between each pair); across them, other CPU."""
    pairs = {}
    for a in range(8):
        for b in range(a + 1, 8):
            pairs[(a, b)] = 250 if a // 4 == b // 4 else 10
    devices = tuple(card(f"GPU-{i}", i, count=1) for i in range(8))
    usage = {f"GPU-{i}": Usage(1, 1000, 0) for i in busy}
    return NodeView("dgx", devices, usage, pair_scores=symmetric(pairs, 8))


def chosen(node: NodeView, gpus: int, annotations: dict[str, str] = TOPOLOGY) -> list[str]:
    plan = plan_pod(pod(container(gpu=gpus, mem=1000), annotations=annotations), SchedulingConfig())
    assert plan is not None
    result = fit_pod(plan, node)
    assert not isinstance(result, NodeRejection), result
    return [grant.uuid for grant in result.grants[0]]


def test_two_cards_go_to_the_pair_with_most_nvlinks_on_four_cards() -> None:
    assert chosen(four_cards(), 2) == ["GPU-0", "GPU-3"]
    assert chosen(four_cards(), 2, {}) == ["GPU-0", "GPU-1"]  # spread: by index


def test_one_card_goes_where_it_breaks_the_fewest_links_on_four_cards() -> None:
    # sums: GPU-0 and GPU-3 1290, GPU-1 and GPU-2 490: the first of the weakest wins
    assert chosen(four_cards(), 1) == ["GPU-1"]


def test_three_cards_take_the_best_triangle() -> None:
    # {0,1,3} and {0,2,3} both sum 1290; the first found in card order wins
    assert chosen(four_cards(), 3) == ["GPU-0", "GPU-1", "GPU-3"]


def test_four_cards_on_eight_stay_inside_one_nvlink_island() -> None:
    assert chosen(eight_cards(busy=(1,)), 4) == ["GPU-4", "GPU-5", "GPU-6", "GPU-7"]


def test_two_cards_on_eight_skip_the_lone_free_card_of_a_broken_island() -> None:
    assert chosen(eight_cards(busy=(0, 1, 2)), 2) == ["GPU-4", "GPU-5"]


def test_one_card_on_eight_takes_the_remnant_and_keeps_an_island_whole() -> None:
    # free: 0-3 (a whole island) and 7 (the last of the other): 7 links least to the rest
    assert chosen(eight_cards(busy=(4, 5, 6)), 1) == ["GPU-7"]


def test_a_node_without_scores_places_like_spread() -> None:
    node = NodeView("n", tuple(card(f"GPU-{i}", i) for i in range(4)), {"GPU-0": Usage(1, 9000)})
    assert chosen(node, 2) == chosen(node, 2, {}) == ["GPU-1", "GPU-2"]
    assert chosen(node, 1) == chosen(node, 1, {}) == ["GPU-1"]


def test_too_few_fitting_cards_counts_the_ones_that_fit() -> None:
    devices = (card("GPU-0", 0), *(card(f"GPU-{i}", i, healthy=False) for i in (1, 2, 3)))
    node = NodeView("n", devices, {}, pair_scores=symmetric({}, 4))
    plan = plan_pod(pod(container(gpu=2), annotations=TOPOLOGY), SchedulingConfig())
    assert plan is not None
    result = fit_pod(plan, node)
    assert isinstance(result, NodeRejection)
    assert result.hami_reason == "1/4 AllocatedCardsInsufficientRequest, 3/4 CardNotHealth"


def test_card_order_puts_the_chosen_cards_first() -> None:
    policies = PodPolicies(topology=True)
    order = card_order(ContainerRequest(count=2, memory=1000), four_cards(), policies)
    assert order == ("GPU-0", "GPU-3", "GPU-1", "GPU-2")
    assert card_order(ContainerRequest(count=1, memory=1000), four_cards(), policies)[0] == "GPU-1"


def test_the_ledger_decides_with_the_scores_the_node_published() -> None:
    node = ClusterNode("n", {SCORE_ANNOTATION: encode_pair_scores(four_cards().pair_scores)})
    ledger = Ledger()
    ledger.set_node("n", four_cards().devices, pair_scores=node.pair_scores())
    plan = plan_pod(pod(container(gpu=2, mem=1000), annotations=TOPOLOGY), SchedulingConfig())
    assert plan is not None
    indexed, exhaustive = ledger.decide(plan), decide(plan, [ledger.view("n")])
    assert isinstance(indexed, Placement) and isinstance(exhaustive, Placement)
    assert [g.uuid for g in indexed.grants[0]] == ["GPU-0", "GPU-3"]
    assert indexed.grants == exhaustive.grants


def test_a_malformed_score_annotation_names_the_annotation() -> None:
    with pytest.raises(CodecError, match=SCORE_ANNOTATION):
        ClusterNode(
            "n", {SCORE_ANNOTATION: '[{"uuid": "GPU-0", "score": {"GPU-1": "high"}}]'}
        ).pair_scores()


def test_numa_bound_topology_chooses_inside_one_numa_node() -> None:
    devices = tuple(card(f"GPU-{i}", i, numa=i // 2) for i in range(4))
    scores = symmetric({(1, 2): 1850, (2, 3): 450}, 4)  # the best pair crosses NUMA nodes
    node = NodeView("n", devices, {}, pair_scores=scores)
    annotations = {**TOPOLOGY, "nvidia.com/numa-bind": "true"}
    assert chosen(node, 2, annotations) == ["GPU-0", "GPU-1"]
    assert chosen(node, 2) == ["GPU-1", "GPU-2"]
