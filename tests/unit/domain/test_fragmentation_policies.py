"""The FGD paper's policies on small hand-made nodes: every score and card worked out here."""

import doctest
import random
from types import ModuleType

import pytest

from vgpu.domain.errors import PolicyError
from vgpu.domain.fragmentation import (
    Fgd,
    MilliNode,
    MilliPod,
    MilliWorkload,
    PaperPolicy,
    RandomPlacement,
    TypicalShape,
    best_fit,
    classic,
    dot_prod,
    fgd,
    fits,
    gpu_clustering,
    gpu_packing,
    milli,
    parse_paper_policy,
    place,
    placement_policy,
    policies,
    tightest_fit,
    typical_shapes,
    workload,
)

WHOLE = MilliPod(cpu=8000, memory=1024, gpus=1, milli=1000)
# A: 32 cores and four idle cards; B: 16 cores, one idle card and one with 200 free
NODE_A = MilliNode("T4", cpu=32000, memory=65536, free=(1000,) * 4)
NODE_B = MilliNode("T4", cpu=16000, memory=65536, free=(1000, 200), kinds=frozenset({0}))


def test_dot_prod_prefers_the_node_whose_free_resources_align_least_with_the_pod() -> None:
    # A: 100 (1 - (32/128 * 8/128 + 4000/8000 * 1000/8000) / 2) = 100 (1 - 0.0390625) = 96.09
    assert dot_prod(NODE_A, WHOLE) == 96
    # B: 100 (1 - (16/128 * 8/128 + 1200/8000 * 1000/8000) / 2) = 100 (1 - 0.01328125) = 98.67
    assert dot_prod(NODE_B, WHOLE) == 98


def test_best_fit_prefers_the_node_left_with_least_cpu_and_gpu() -> None:
    # A: 100 (1 - (0.5 * 24/128 + 0.5 * 3000/8000)) = 100 (1 - 0.28125) = 71.875
    assert best_fit(NODE_A, WHOLE) == 71
    # B: 100 (1 - (0.5 * 8/128 + 0.5 * 200/8000)) = 100 (1 - 0.04375) = 95.625
    assert best_fit(NODE_B, WHOLE) == 95


def test_gpu_clustering_keeps_pods_of_one_kind_together() -> None:
    share = MilliPod(gpus=1, milli=300)
    # base = floor(25 (8000 - U) / 8000): A has U = 4000 -> 12; B has U = 1200 -> 21
    assert gpu_clustering(NODE_A, share) == 12 + 25  # no GPU pod on A yet
    assert gpu_clustering(NODE_B, share) == 21 + 75  # B hosts shares only
    assert gpu_clustering(NODE_B, WHOLE) == 21  # one-card pods are not among B's kinds
    mixed = MilliNode("T4", 0, 0, (1000, 200), frozenset({0, 1}))
    assert gpu_clustering(mixed, WHOLE) == 21 + 50
    assert gpu_clustering(NODE_B, MilliPod(cpu=1000)) == 0  # CPU-only pods: no preference


def test_gpu_packing_fills_used_cards_then_used_nodes_and_leaves_idle_nodes_last() -> None:
    share = MilliPod(gpus=1, milli=150)
    assert gpu_packing(NODE_A, share) == 29  # idle node of 4 cards: max(33 - 4, 4)
    assert gpu_packing(NODE_B, share) == 98  # tightest card has 200 free: 100 - floor(20 / 10)
    assert gpu_packing(NODE_B, MilliPod(gpus=1, milli=250)) == 49  # only the idle card holds it
    assert gpu_packing(NODE_B, MilliPod(gpus=1, milli=1000)) == 49  # whole: max(50 - 1, 33)
    used = MilliNode("G2", 0, 0, (0,) + (1000,) * 7)
    assert gpu_packing(used, MilliPod(gpus=4, milli=1000)) == 46  # max(50 - 4, 33)
    assert gpu_packing(MilliNode("V100M16", 0, 0, (1000,)), share) == 32  # max(33 - 1, 1)
    assert gpu_packing(NODE_B, MilliPod(cpu=4000)) == 0


def test_baselines_give_a_share_its_tightest_card_and_whole_cards_the_lowest_free_ones() -> None:
    node = MilliNode("G2", 96000, 0, (1000, 400, 0, 300, 1000, 300, 1000))
    assert tightest_fit(node, MilliPod(gpus=1, milli=250)) == (3,)  # 300 on 3 and 5: lowest
    assert tightest_fit(node, MilliPod(gpus=1, milli=350)) == (1,)
    assert tightest_fit(node, MilliPod(gpus=2, milli=1000)) == (0, 4)
    assert tightest_fit(node, MilliPod(cpu=1000)) == ()


def test_fits_checks_cpu_memory_model_and_enough_roomy_cards() -> None:
    pod = MilliPod(cpu=16000, memory=4096, gpus=1, milli=200)
    assert fits(NODE_B, pod)
    assert not fits(NODE_B, MilliPod(cpu=16001, gpus=1, milli=200))
    assert not fits(NODE_B, MilliPod(memory=65537))
    assert not fits(NODE_B, MilliPod(gpus=2, milli=300))  # one card has 300 or more free
    assert fits(NODE_B, MilliPod(gpus=2, milli=200))
    assert not fits(NODE_B, MilliPod(gpus=1, milli=100, models=frozenset({"P100", "V100M16"})))
    assert fits(NODE_B, MilliPod(gpus=1, milli=100, models=frozenset({"P100", "T4"})))


def test_placing_takes_cpu_memory_and_each_cards_share_and_notes_the_kind() -> None:
    after = place(NODE_A, MilliPod(cpu=2000, memory=512, gpus=2, milli=1000), (0, 2))
    assert after == MilliNode("T4", 30000, 65024, (0, 1000, 0, 1000), frozenset({2}))
    assert place(after, MilliPod(cpu=1000), ()).kinds == frozenset({2})


# FGD: three in four pods of the workload take half a card, one in four a whole card
SHAPES = MilliWorkload([TypicalShape(3, 1, 500), TypicalShape(1, 1, 1000)])


def test_fragmentation_counts_cards_too_small_for_each_shape_weighted_by_its_share() -> None:
    fgd_policy = Fgd(SHAPES)
    # (1000, 600): halves fit everywhere (0 stranded); a whole card fits, 600 is stranded
    assert fgd_policy.fragmentation(MilliNode("T4", 0, 0, (1000, 600))) == (3 * 0 + 600) / 4
    # (400, 0): neither shape fits, so all 400 free are stranded for both
    assert fgd_policy.fragmentation(MilliNode("T4", 0, 0, (400, 0))) == 400


def test_fgd_scores_the_drop_in_fragmentation_and_picks_the_card_that_strands_least() -> None:
    fgd_policy = Fgd(SHAPES)
    roomy = MilliNode("T4", 8000, 0, (1000, 600))  # F = 150
    share = MilliPod(cpu=1000, gpus=1, milli=200)
    # card 0 -> (800, 600): no whole card left, F' = (0 + 1400) / 4 = 350, sigma(-0.2) = 0.450
    # card 1 -> (1000, 400): 400 stranded for both shapes, F' = (1200 + 400) / 4 = 400: 0.438
    assert fgd_policy.score(roomy, share) == 45
    assert fgd_policy.cards(roomy, share) == (0,)
    assert tightest_fit(roomy, share) == (1,)  # where the baselines would put it
    # (400, 0) -> (200, 0): F = 400, F' = 200, sigma(0.2) = 0.550: the better node
    assert fgd_policy.score(MilliNode("T4", 8000, 0, (400, 0)), share) == 54


def test_fgd_counts_a_node_short_of_cpu_for_a_shape_as_wholly_fragmented() -> None:
    fgd_policy = Fgd(MilliWorkload([TypicalShape(1, 1, 500, cpu=4000)]))
    assert fgd_policy.fragmentation(MilliNode("T4", 4000, 0, (1000, 300))) == 300
    assert fgd_policy.fragmentation(MilliNode("T4", 3999, 0, (1000, 300))) == 1300
    # taking 1 of the 4 cores strands the whole 1300: F' - F = 1000, sigma(-1.0) = 0.269
    assert fgd_policy.score(MilliNode("T4", 4000, 0, (1000, 300)), MilliPod(cpu=1000)) == 26


def test_fgd_counts_shapes_pinned_to_other_models_and_cpu_shapes_as_wholly_fragmented() -> None:
    pinned = MilliWorkload([TypicalShape(1, 1, 500, models=frozenset({"A10"})), TypicalShape(1, 0, 0)])
    fgd_policy = Fgd(pinned)
    assert fgd_policy.fragmentation(MilliNode("T4", 0, 0, (1000, 300))) == 1300
    assert fgd_policy.fragmentation(MilliNode("A10", 0, 0, (1000, 300))) == (300 + 1300) / 2


def test_fgd_gives_whole_card_pods_the_lowest_free_cards() -> None:
    node = MilliNode("G2", 0, 0, (300, 1000, 1000, 1000))
    assert Fgd(SHAPES).cards(node, MilliPod(gpus=2, milli=1000)) == (1, 2)


def test_typical_shapes_are_the_commonest_until_they_cover_the_share_asked() -> None:
    pods = (
        [MilliPod(1000, 0, 1, 500)] * 5
        + [MilliPod(4000, 0, 1, 1000)] * 2
        + [MilliPod(2000, 0, 1, 1000)] * 2
        + [MilliPod(1000, 99, 0, 0)]
    )
    shapes = typical_shapes(pods, coverage=0.8)
    # 5 + 2 + 2 = 9 of 10 covers 80 %; of the two shapes with 2 pods the larger (more CPU) first
    assert [(s.count, s.cpu, s.milli) for s in shapes] == [
        (5, 1000, 500),
        (2, 4000, 1000),
        (2, 2000, 1000),
    ]
    assert len(typical_shapes(pods, coverage=0.5)) == 1


def test_random_draws_a_card_among_those_that_hold_the_share() -> None:
    chooser = RandomPlacement(random.Random(7))
    node = MilliNode("T4", 0, 0, (1000, 100, 600, 0))
    drawn = {chooser.cards(node, MilliPod(gpus=1, milli=500))[0] for _ in range(200)}
    assert drawn == {0, 2}
    assert chooser.cards(node, MilliPod(gpus=1, milli=1000)) == (0,)


def test_policies_by_name() -> None:
    assert parse_paper_policy(" FGD ") is PaperPolicy.FGD
    with pytest.raises(PolicyError, match=r"--policy='fdg' is not a known policy.*gpupacking"):
        parse_paper_policy("fdg", "--policy")
    rng = random.Random(1)
    assert isinstance(placement_policy(PaperPolicy.FGD, SHAPES, rng), Fgd)
    assert isinstance(placement_policy(PaperPolicy.RANDOM, SHAPES, rng), RandomPlacement)
    bestfit = placement_policy(PaperPolicy.BESTFIT, SHAPES, rng)
    assert not isinstance(bestfit, RandomPlacement)
    assert bestfit.score(NODE_B, WHOLE) == 95


@pytest.mark.parametrize("module", [classic, fgd, milli, policies, workload])
def test_docstring_examples_hold(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
