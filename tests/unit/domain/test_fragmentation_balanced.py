"""FGD-balanced on small hand-made clusters: what it prefers where FGD sees no difference, and
that it is FGD where CPU, memory and card models do not matter."""

import doctest
import random

from vgpu.domain.fragmentation import (
    Balanced,
    Fgd,
    MilliNode,
    MilliPod,
    MilliWorkload,
    PaperPolicy,
    TypicalShape,
    balanced,
    claims,
    expected_waste,
    fits,
    parse_paper_policy,
    placement_policy,
)

PLENTY = 1 << 40  # memory no shape runs out of
WHOLE_CARD = TypicalShape(1, 1, 1000, cpu=8000)


def test_cpu_a_node_lacks_strands_the_cards_it_cannot_serve() -> None:
    policy = Balanced(MilliWorkload([WHOLE_CARD]), {})
    # 16 cores serve two more 8-core pods: two of the four idle cards are out of reach
    assert policy.fragmentation(MilliNode("G2", 16000, PLENTY, (1000,) * 4)) == 2000
    assert policy.fragmentation(MilliNode("G2", 64000, PLENTY, (1000,) * 4)) == 0
    # 12 cores serve one and a half pods: the second card counts half reached
    assert policy.fragmentation(MilliNode("G2", 12000, PLENTY, (1000,) * 4)) == 2500
    # fewer cores than one pod needs: every free card stranded, as FGD counts it
    assert policy.fragmentation(MilliNode("G2", 7999, PLENTY, (1000,) * 4)) == 4000


def test_host_memory_a_node_lacks_strands_cards_as_cpu_does() -> None:
    shape = TypicalShape(1, 1, 1000, cpu=1000, memory=32768)
    policy = Balanced(MilliWorkload([shape]), {})
    assert policy.fragmentation(MilliNode("G2", 64000, 65536, (1000,) * 4)) == 2000
    assert policy.fragmentation(MilliNode("G2", 64000, 32767, (1000,) * 4)) == 4000


def test_a_cpu_only_pod_goes_where_the_cards_do_not_need_the_cpu() -> None:
    workload = MilliWorkload([WHOLE_CARD])
    cpu_rich = MilliNode("T4", 64000, PLENTY, (1000,) * 4)
    cpu_poor = MilliNode("G2", 16000, PLENTY, (1000,) * 4)
    pod = MilliPod(cpu=8000)
    # FGD: one more card pod still fits either node afterwards, so both score 50
    assert Fgd(workload).score(cpu_rich, pod) == Fgd(workload).score(cpu_poor, pod) == 50
    policy = Balanced(workload, {})
    # on the poor node only one more card pod would fit: 3000 stranded instead of 2000
    assert policy.score(cpu_rich, pod) == 50
    assert policy.score(cpu_poor, pod) == 26  # floor(100 sigma(-1.0))


def test_pods_light_on_cpu_go_to_the_nodes_short_of_it() -> None:
    light, heavy = TypicalShape(1, 1, 1000, cpu=4000), TypicalShape(1, 1, 1000, cpu=16000)
    workload = MilliWorkload([light, heavy])
    lean = MilliNode("G2", 20000, PLENTY, (1000, 1000))  # CPU for 1.25 heavy pods
    ample = MilliNode("G2", 64000, PLENTY, (1000, 1000))
    light_pod = MilliPod(cpu=4000, gpus=1, milli=1000)
    heavy_pod = MilliPod(cpu=16000, gpus=1, milli=1000)
    fgd = Fgd(workload)
    assert fgd.score(lean, light_pod) == fgd.score(ample, light_pod) == 50  # FGD: a tie
    policy = Balanced(workload, {})
    # the light pod leaves the lean node one card and 16 cores, enough for either shape:
    # the 750 milli its CPU could not reach for heavy pods are no longer stranded
    assert policy.score(lean, light_pod) == 59  # floor(100 sigma(750 / 2 / 1000))
    assert policy.score(ample, light_pod) == 50
    # the heavy pod would leave the lean node 4 cores: its last card stranded for heavy pods
    assert policy.score(lean, heavy_pod) == 46  # floor(100 sigma(-250 / 2 / 1000))
    assert policy.score(ample, heavy_pod) == 50


def test_claims_spread_each_pinned_shape_over_the_cards_of_its_models() -> None:
    shapes = [
        TypicalShape(2, 1, 1000),  # may go anywhere: claims nothing
        TypicalShape(1, 1, 1000, models=frozenset({"T4", "V100"})),
        TypicalShape(1, 1, 1000, models=frozenset({"A100"})),  # no such cards: no claim
        TypicalShape(5, 0, 0, cpu=1000),  # CPU only
    ]
    # the T4|V100 shape asks 1000 of the 4000 milli of demand, a quarter, for 4 of 10 cards
    assert claims(shapes, {"T4": 2, "V100": 2, "G2": 6}) == {"T4": 0.625, "V100": 0.625, "G2": 0.0}
    assert claims(shapes, {}) == {}


def test_a_pod_free_to_go_anywhere_keeps_off_the_model_pinned_pods_need() -> None:
    share = TypicalShape(1, 1, 500)
    pinned = TypicalShape(1, 1, 1000, models=frozenset({"T4"}))
    workload = MilliWorkload([share, pinned])
    t4 = MilliNode("T4", 64000, PLENTY, (500, 1000))
    g2 = MilliNode("G2", 64000, PLENTY, (1000,) * 8)
    pod = MilliPod(cpu=1000, gpus=1, milli=500)
    # FGD: on the T4 the share fills the half card; on the G2 it takes GPU the pinned shape
    # cannot use anyway: both drop F by 250, a tie the node ranks break
    assert Fgd(workload).score(t4, pod) == Fgd(workload).score(g2, pod) == 56
    policy = Balanced(workload, {"T4": 2, "G2": 8})
    # the T4 shape asks 2/3 of the demand for 1/5 of the cards: a claim of 10/3 on each T4
    # milli, so the 500 the share takes there cost 1667 milli of fragmentation
    assert policy.score(t4, pod) == 19  # floor(100 sigma((250 - 1667) / 1000))
    assert policy.score(g2, pod) == 56
    unclaimed = Balanced(workload, {})
    assert unclaimed.score(t4, pod) == unclaimed.score(g2, pod) == 56


def test_with_cpu_and_memory_to_spare_it_is_fgd_plus_each_cards_expected_waste() -> None:
    rng = random.Random(11)
    shapes = [
        TypicalShape(rng.randint(1, 9), gpus, milli, cpu=rng.choice((0, 2000, 8000)))
        for gpus, milli in ((1, 200), (1, 500), (1, 700), (1, 1000), (2, 1000))
    ]
    workload = MilliWorkload(shapes)
    fgd, policy = Fgd(workload), Balanced(workload, {"G2": 8})
    # every shape may use G2's cards, all of them ask for GPU: the waste weighs 1 per card
    fills = {s.milli: 0 for s in shapes}
    for s in shapes:
        fills[s.milli] += s.count * (s.gpus if s.milli == 1000 else 1)
    waste = expected_waste(fills)
    checked = 0
    for _ in range(300):
        free = tuple(rng.choice((0, 100, 300, 500, 800, 1000)) for _ in range(rng.choice((2, 8))))
        node = MilliNode("G2", 1 << 30, PLENTY, free)
        pod = MilliPod(rng.choice((0, 4000)), 0, *rng.choice(((1, 300), (1, 500), (2, 1000))))
        if not fits(node, pod):
            continue
        expected = fgd.fragmentation(node) + sum(waste[f // 10] for f in free)
        assert abs(policy.fragmentation(node) - expected) < 1e-6
        checked += 1
    assert checked > 100


def test_a_share_goes_where_it_leaves_a_card_the_typical_pods_fill() -> None:
    workload = MilliWorkload([TypicalShape(1, 1, 500, cpu=1000)])
    policy = Balanced(workload, {})
    fresh = MilliNode("G2", 64000, PLENTY, (1000,))
    used = MilliNode("G2", 64000, PLENTY, (750,))
    pod = MilliPod(cpu=1000, gpus=1, milli=250)
    # one pod ahead both cards stay fit for a 500 pod; but 1000 - 250
    # ends with 250 unused after a 500, while 750 - 250 is exactly one 500
    assert Fgd(workload).score(fresh, pod) == Fgd(workload).score(used, pod) == 50
    assert policy.fragmentation(fresh) == 0 and policy.fragmentation(used) == 250
    assert policy.score(used, pod) == 56  # floor(100 sigma(250 / 1000))
    assert policy.score(fresh, pod) == 43
    # on a node, the share takes the card it leaves fit: 750, not 1000
    assert policy.cards(MilliNode("G2", 64000, PLENTY, (1000, 750)), pod) == (1,)


def test_it_differs_from_fgd_on_cpu_only_shapes_which_strand_no_card() -> None:
    workload = MilliWorkload([TypicalShape(1, 1, 500), TypicalShape(1, 0, 0, cpu=1000)])
    node = MilliNode("T4", 64000, PLENTY, (1000, 300))
    assert Fgd(workload).fragmentation(node) == (300 + 1300) / 2  # every free milli, for CPU pods
    # the 300 is stranded for the 500 shape, and is what its card is left with
    assert Balanced(workload, {}).fragmentation(node) == (300 + 300) / 2


def test_whole_card_pods_take_the_lowest_free_cards_and_shares_the_best_card() -> None:
    policy = Balanced(MilliWorkload([TypicalShape(1, 1, 1000, cpu=1000)]), {})
    node = MilliNode("G2", 64000, PLENTY, (300, 1000, 1000, 600))
    assert policy.cards(node, MilliPod(cpu=1000, gpus=2, milli=1000)) == (1, 2)
    # a share of 300 fills card 0; on any other card it would leave a card with no whole card
    assert policy.cards(node, MilliPod(cpu=1000, gpus=1, milli=300)) == (0,)
    assert policy.cards(node, MilliPod(cpu=1000)) == ()


def test_it_is_named_fgd_balanced_and_takes_its_claims_from_the_cluster() -> None:
    assert parse_paper_policy("FGD-Balanced") is PaperPolicy.FGD_BALANCED
    workload = MilliWorkload([TypicalShape(1, 1, 1000, models=frozenset({"T4"}))])
    cluster = [MilliNode("T4", 0, 0, (1000,) * 2), MilliNode("G2", 0, 0, (1000,) * 8)]
    claimed = placement_policy(PaperPolicy.FGD_BALANCED, workload, random.Random(), cluster)
    unclaimed = placement_policy(PaperPolicy.FGD_BALANCED, workload, random.Random())
    assert isinstance(claimed, Balanced) and isinstance(unclaimed, Balanced)
    pod = MilliPod(gpus=1, milli=1000, models=frozenset({"T4", "G2"}))
    # the T4 pods ask all the demand for a fifth of the cards: a claim of 5 per T4 milli
    assert claimed.score(cluster[0], pod) == 0  # floor(100 sigma(-5)), sigma(-5) = 0.0067
    assert unclaimed.score(cluster[0], pod) == 50


def test_docstring_examples_hold() -> None:
    result = doctest.testmod(balanced)
    assert result.failed == 0 and result.attempted > 0
