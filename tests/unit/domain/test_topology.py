"""Pair scores (docs/protocol.md#pair-scores) and HAMi's topology-aware choice (docs/protocol.md#topology-aware-choice) on NVLink layouts."""

import pytest

from vgpu.domain.errors import CodecError
from vgpu.domain.topology import (
    GpuLink,
    PcieLink,
    best_combination,
    choose_cards,
    decode_pair_scores,
    encode_pair_scores,
    least_connected_card,
    pair_scores,
)


def _both_ways(pairs: dict[tuple[int, int], tuple[PcieLink, int]], n: int) -> list[GpuLink]:
    links = []
    for i in range(n):
        for j in range(n):
            if i != j:
                pcie, nvlinks = pairs.get((min(i, j), max(i, j)), (PcieLink.CROSS_CPU, 0))
                links.append(GpuLink(f"g{i}", f"g{j}", pcie, nvlinks))
    return links


# DGX-1 (V100) hybrid cube-mesh: two fully linked quads (1 or 2 NVLinks per pair), each GPU
# also linked to its twin in the other quad; PCIe switches pair 0-1, 2-3, 4-5, 6-7.
DGX1 = pair_scores(
    _both_ways(
        {
            (0, 1): (PcieLink.SINGLE_SWITCH, 1),
            (0, 2): (PcieLink.SAME_CPU, 1),
            (0, 3): (PcieLink.SAME_CPU, 2),
            (1, 2): (PcieLink.SAME_CPU, 2),
            (1, 3): (PcieLink.SAME_CPU, 1),
            (2, 3): (PcieLink.SINGLE_SWITCH, 2),
            (4, 5): (PcieLink.SINGLE_SWITCH, 1),
            (4, 6): (PcieLink.SAME_CPU, 1),
            (4, 7): (PcieLink.SAME_CPU, 2),
            (5, 6): (PcieLink.SAME_CPU, 2),
            (5, 7): (PcieLink.SAME_CPU, 1),
            (6, 7): (PcieLink.SINGLE_SWITCH, 2),
            (0, 4): (PcieLink.CROSS_CPU, 2),
            (1, 5): (PcieLink.CROSS_CPU, 2),
            (2, 6): (PcieLink.CROSS_CPU, 1),
            (3, 7): (PcieLink.CROSS_CPU, 1),
        },
        8,
    )
).scores
EIGHT = [f"g{i}" for i in range(8)]

# Four cards: g0, g1, g2 bridged by NVLink (2 links each pair), g3 on PCIe only.
FOUR = pair_scores(
    _both_ways(
        {
            (0, 1): (PcieLink.SINGLE_SWITCH, 2),
            (0, 2): (PcieLink.HOST_BRIDGE, 2),
            (1, 2): (PcieLink.HOST_BRIDGE, 2),
            (0, 3): (PcieLink.HOST_BRIDGE, 0),
            (1, 3): (PcieLink.HOST_BRIDGE, 0),
            (2, 3): (PcieLink.SINGLE_SWITCH, 0),
        },
        4,
    )
).scores
FOUR_CARDS = ["g0", "g1", "g2", "g3"]


def test_pair_scores_add_pcie_points_and_100_per_nvlink() -> None:
    assert GpuLink("a", "b", PcieLink.SINGLE_SWITCH).score == 50
    assert GpuLink("a", "b", PcieLink.SINGLE_SWITCH, 4).score == 450
    assert GpuLink("a", "b", PcieLink.CROSS_CPU, 18).score == 1810
    assert DGX1["g0"]["g3"] == 220 and DGX1["g0"]["g4"] == 210 and DGX1["g0"]["g5"] == 10


def test_a_pair_whose_directions_disagree_scores_zero_and_is_reported() -> None:
    topology = pair_scores(
        [
            GpuLink("a", "b", PcieLink.SINGLE_SWITCH, 2),
            GpuLink("b", "a", PcieLink.SINGLE_SWITCH, 1),
            GpuLink("a", "c", PcieLink.SAME_CPU),
            GpuLink("c", "a", PcieLink.SAME_CPU),
        ]
    )
    assert topology.scores == {"a": {"b": 0, "c": 20}, "b": {"a": 0}, "c": {"a": 20}}
    assert topology.asymmetric == (("a", "b"),)


@pytest.mark.parametrize(("nvlinks", "same"), [(-1, False), (37, False), (0, True)])
def test_impossible_links_are_refused(nvlinks: int, same: bool) -> None:
    if same:
        with pytest.raises(ValueError, match="needs two GPUs"):
            GpuLink("a", "a", PcieLink.SAME_BOARD)
    else:
        with pytest.raises(ValueError, match=f"nvlinks={nvlinks}"):
            GpuLink("a", "b", PcieLink.SAME_BOARD, nvlinks)


def test_the_score_annotation_round_trips_hamis_form() -> None:
    text = (
        '[{"uuid":"GPU-a","score":{"GPU-b":450,"GPU-c":20}},'
        '{"uuid":"GPU-b","score":{"GPU-a":450,"GPU-c":20}},'
        '{"uuid":"GPU-c","score":{"GPU-a":20,"GPU-b":20}}]'
    )
    assert encode_pair_scores(decode_pair_scores(text)) == text


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[{", "invalid JSON"),
        ('{"uuid":"a"}', "JSON array"),
        ('[{"score":{}}]', "entry #0: expected an object with a string uuid"),
        ('[{"uuid":"a","score":{"b":"high"}}]', "entry #0: score must map"),
        ('[{"uuid":"a","score":{"b":true}}]', "entry #0: score must map"),
    ],
)
def test_a_bad_score_annotation_names_the_fault(text: str, words: str) -> None:
    with pytest.raises(CodecError, match=r"hami\.io/node-nvidia-score") as caught:
        decode_pair_scores(text)
    assert words in str(caught.value)


def test_eight_cards_four_wanted_get_one_fully_linked_quad() -> None:
    assert choose_cards(EIGHT, 4, DGX1) == ("g0", "g1", "g2", "g3")


def test_eight_cards_with_the_first_quad_partly_busy_take_the_other_quad() -> None:
    free = ["g1", "g2", "g4", "g5", "g6", "g7"]
    assert choose_cards(free, 4, DGX1) == ("g4", "g5", "g6", "g7")


def test_eight_cards_two_wanted_take_the_double_nvlink_pair() -> None:
    assert choose_cards(["g0", "g1", "g4", "g5"], 2, DGX1) == ("g0", "g4")
    assert choose_cards(EIGHT, 2, DGX1) == ("g2", "g3")  # 2 NVLinks and one PCIe switch


def test_four_cards_one_wanted_takes_the_card_outside_the_nvlink_group() -> None:
    assert choose_cards(FOUR_CARDS, 1, FOUR) == ("g3",)
    assert least_connected_card(["g0", "g1", "g2"], FOUR) == "g2"  # its PCIe paths are longer
    assert least_connected_card(["g1", "g0"], FOUR) == "g1"  # tie: first found


def test_four_cards_several_wanted_take_the_nvlink_group() -> None:
    assert choose_cards(FOUR_CARDS, 3, FOUR) == ("g0", "g1", "g2")
    assert choose_cards(FOUR_CARDS, 2, FOUR) == ("g0", "g1")
    assert choose_cards(["g0", "g2", "g3"], 2, FOUR) == ("g0", "g2")


def test_exactly_as_many_candidates_as_wanted_are_taken_as_they_are() -> None:
    assert choose_cards(["g3", "g0"], 2, FOUR) == ("g3", "g0")


def test_too_few_candidates_means_no_choice() -> None:
    assert choose_cards(["g0"], 2, FOUR) is None
    with pytest.raises(ValueError, match="count=0"):
        choose_cards(FOUR_CARDS, 0, FOUR)
    with pytest.raises(ValueError, match="cannot choose 5"):
        best_combination(FOUR_CARDS, 5, FOUR)


def test_cards_missing_from_the_annotation_score_zero() -> None:
    assert choose_cards(["g0", "unknown", "g1"], 2, FOUR) == ("g0", "g1")
    assert choose_cards(["g0", "unknown", "g1"], 1, FOUR) == ("unknown",)
