"""FGD-balanced on the cards vgpu registers (`card_balanced.py`): the claims card kinds get from
the shapes pinned to them, a node whose CPU and memory are unknown, and the cluster's cards as
the ledger counts them for the live scheduler."""

import pytest

from vgpu.domain import Device, Ledger
from vgpu.domain.fragmentation.card_balanced import CardBalanced, card_kind
from vgpu.domain.fragmentation.cards import CardShape, CardWorkload

T4_MIB, V100_MIB, A10_MIB = 16384, 32768, 24576


def card(kind: str, memory: int, index: int = 0, node: str = "n") -> Device:
    return Device(f"GPU-{node}-{kind}-{index}", index, f"NVIDIA {kind}", 20, memory, 100)


T4, V100, A10 = card("T4", T4_MIB), card("V100", V100_MIB), card("A10", A10_MIB)
HALF = CardShape(1, memory_percent=50, cores=50, cpu=4000, host_memory=8192)
PINNED_T4 = CardShape(1, memory_percent=100, cores=100, use_types=(("t4",),))


def test_a_card_kind_pinned_shapes_need_is_claimed_in_proportion_to_their_gpu() -> None:
    # GPU asked: 3 x 500 unpinned + 1 x 1000 on T4 = 2500; T4 holds 2 of the 10 cards
    policy = CardBalanced([(HALF, 3), (PINNED_T4, 1)], ((card_kind(T4), 2), (card_kind(V100), 8)))
    assert policy.table_for(T4).claim == pytest.approx(1000 / 2500 * 10 / 2)
    assert policy.table_for(V100).claim == 0.0


def test_a_shape_asking_mib_counts_the_share_it_averages_over_the_cards_it_accepts() -> None:
    # 8 GiB is half a T4 and a quarter of a V100: 1 T4 and 3 V100 cards average 312.5 milli
    mib = CardShape(1, memory=8192, use_types=(("t4",), ("v100",)))
    whole = CardShape(1, memory_percent=100, cores=100)
    cards = ((card_kind(T4), 1), (card_kind(V100), 3), (card_kind(A10), 4))
    policy = CardBalanced([(mib, 1), (whole, 1)], cards)
    claim = 312.5 / (312.5 + 1000) * 8 / 4
    assert policy.table_for(T4).claim == pytest.approx(claim)
    assert policy.table_for(V100).claim == pytest.approx(claim)
    assert policy.table_for(A10).claim == 0.0


def test_a_pod_free_to_go_anywhere_scores_higher_off_the_kind_pinned_pods_need() -> None:
    policy = CardBalanced([(HALF, 3), (PINNED_T4, 1)], ((card_kind(T4), 2), (card_kind(V100), 8)))
    idle, half = [1000], [500]
    on_t4 = policy.score([T4], idle, half, None, None)
    on_v100 = policy.score([V100], idle, half, None, None)
    assert on_v100 > on_t4


def test_a_node_whose_cpu_and_memory_are_unknown_has_enough_for_every_shape() -> None:
    policy = CardBalanced([(HALF, 1)], ((card_kind(T4), 2),))
    before, after = [1000, 1000], [500, 1000]
    roomy = (64000, 262144), (60000, 254000)
    unknown = policy.score([T4, T4], before, after, None, None)
    assert unknown == policy.score([T4, T4], before, after, *roomy)
    # memory for one more such pod only: the second card can no longer be reached
    short = (64000, 16384), (60000, 8192)
    assert policy.score([T4, T4], before, after, *short) != unknown
    assert policy.card_scores([T4, T4], before, [(0, 500)], None, None) == [unknown]


def test_the_ledger_counts_the_clusters_cards_per_kind_until_a_node_changes() -> None:
    ledger = Ledger()
    ledger.set_node("a", [card("T4", T4_MIB, i, "a") for i in range(4)])
    ledger.set_node("b", [card("V100", V100_MIB, i, "b") for i in range(2)])
    counts = ledger.card_counts()
    assert counts == ((card_kind(T4), 4), (card_kind(V100), 2))
    ledger.set_node("a", [card("T4", T4_MIB, i, "a") for i in range(4)])  # the same cards
    assert ledger.card_counts() is counts
    ledger.set_node("a", [card("T4", T4_MIB, i, "a") for i in range(3)])
    assert ledger.card_counts() == ((card_kind(T4), 3), (card_kind(V100), 2))
    ledger.remove_node("b")
    assert ledger.card_counts() == ((card_kind(T4), 3),)


def test_a_workload_keeps_its_balanced_tables_while_the_clusters_cards_stay() -> None:
    workload = CardWorkload([(HALF, 1)])
    cards = ((card_kind(T4), 2),)
    kept = workload.balanced(cards)
    assert workload.balanced(((card_kind(T4), 2),)) is kept
    assert workload.balanced(((card_kind(T4), 3),)) is not kept
