"""`hami.io/device-scoring-weights` is read exactly as HAMi v2.10 reads it (docs/protocol.md#device-scoring-weights)."""

import pytest

from vgpu.domain.errors import CodecError
from vgpu.domain.scoring_weights import (
    SCORING_WEIGHTS_ANNOTATION,
    ScoringWeights,
    parse_scoring_weights,
    weights_from_annotations,
)


@pytest.mark.parametrize(
    ("text", "weights"),
    [
        ("slot=1,core=1,memory=3", ScoringWeights(1, 1, 3)),
        ("memory=1, slot=0, core=0", ScoringWeights(0, 0, 1)),
        (" core = 2 ,memory=0,slot= 5 ", ScoringWeights(5, 2, 0)),
        ("slot=+4,core=0,memory=0", ScoringWeights(4, 0, 0)),
    ],
)
def test_valid_weights_are_read_in_any_order(text: str, weights: ScoringWeights) -> None:
    assert parse_scoring_weights(text) == weights


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("slot=1,core=1", "has 2 item(s)"),
        ("slot=1,core=1,memory=1,slot=2", "has 4 item(s)"),
        ("gpu=1,core=1,memory=1", "item #0 ('gpu=1'): unknown key 'gpu'"),
        ("slot=1,slot=1,memory=1", "item #1 ('slot=1'): slot is given twice"),
        ("slot=1,core,memory=1", "item #1 ('core'): expected key=value"),
        ("slot=1,core=1.5,memory=1", "core='1.5' is not a whole number"),
        ("slot=1,core=1_0,memory=1", "core='1_0' is not a whole number"),
        ("slot=1,core=,memory=1", "core='' is not a whole number"),
        ("slot=-1,core=1,memory=1", "slot=-1 is negative"),
        ("slot=0,core=0,memory=0", "every weight is 0"),
        ("slot=9223372036854775808,core=0,memory=1", "is not a whole number"),
        ("", "has 1 item(s)"),
    ],
)
def test_invalid_weights_are_refused_with_the_item_and_reason(text: str, words: str) -> None:
    with pytest.raises(CodecError, match=SCORING_WEIGHTS_ANNOTATION) as caught:
        parse_scoring_weights(text)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    "text",
    [
        f"slot={'9' * 256000},core=0,memory=1",
        f"slot=-{'9' * 5000},core=0,memory=1",
        f"slot=1,core=1,{'x' * 256000}=1",
        "slot=1," * 50000,
    ],
    ids=["huge-number", "huge-negative", "huge-key", "many-items"],
)
def test_a_huge_value_is_refused_briefly_naming_the_annotation(text: str) -> None:
    with pytest.raises(CodecError, match=SCORING_WEIGHTS_ANNOTATION) as caught:
        parse_scoring_weights(text)
    assert len(str(caught.value)) < 400  # the value is cut short, not echoed


def test_a_pod_without_the_annotation_gets_weights_of_one() -> None:
    assert weights_from_annotations({"other": "x"}) == ScoringWeights(1, 1, 1)


def test_a_pod_with_a_bad_annotation_is_refused_not_defaulted() -> None:
    with pytest.raises(CodecError):
        weights_from_annotations({SCORING_WEIGHTS_ANNOTATION: "slot=1"})


def test_weights_change_which_card_scores_higher() -> None:
    busy_slots = (0.9, 0.1, 0.1)  # many small tenants
    busy_memory = (0.1, 0.1, 0.8)  # one large tenant
    memory_heavy = ScoringWeights(slot=0, core=0, memory=1)
    slot_heavy = ScoringWeights(slot=1, core=0, memory=0)
    assert memory_heavy.weigh(*busy_memory) > memory_heavy.weigh(*busy_slots)
    assert slot_heavy.weigh(*busy_slots) > slot_heavy.weigh(*busy_memory)
