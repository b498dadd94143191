"""Numbers and JSON that tenants and nodes write are read as HAMi's Go code reads them, and
anything else is a sentence naming the annotation, never Python's "Exceeds the limit (4300
digits)" or a RecursionError surfacing as an internal error."""

import doctest
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.domain import CodecError, decode_node_devices, decode_pod_grants
from vgpu.domain import hostile_text as module
from vgpu.domain.hostile_text import INT64, read_json, whole_number
from vgpu.domain.mig import decode_mig_allocations
from vgpu.domain.topology import decode_pair_scores

HUGE = "9" * 256000


def test_the_module_examples_hold() -> None:
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize(
    ("text", "value"), [("0", 0), ("+7", 7), ("-7", -7), ("007", 7), (str(INT64[1]), INT64[1])]
)
def test_go_decimal_integers_are_read(text: str, value: int) -> None:
    assert whole_number(text, *INT64) == value


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "is not a whole number"),
        ("+", "is not a whole number"),
        (" 5", "is not a whole number"),  # int() would take these four; Go's ParseInt does not
        ("1_000", "is not a whole number"),
        ("١٢", "is not a whole number"),
        ("5\n", "is not a whole number"),
        ("1.5", "is not a whole number"),
        (str(INT64[1] + 1), "is out of range"),
        (HUGE, "is out of range"),
        ("-" + HUGE, "is out of range"),
        ("0" * 5000 + "1", None),
    ],
)
def test_anything_else_is_a_value_error_with_a_phrase(text: str, problem: str | None) -> None:
    if problem is None:  # leading zeros do not make a number long
        assert whole_number(text, *INT64) == 1
        return
    with pytest.raises(ValueError, match=problem):
        whole_number(text, *INT64)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=30), st.integers().map(str), st.just(HUGE)))
def test_any_text_is_an_int_in_range_or_a_value_error(text: str) -> None:
    try:
        value = whole_number(text, -100, 100)
    except ValueError as exc:
        assert str(exc) in ("is not a whole number", "is out of range (-100..100)")
        return
    assert -100 <= value <= 100 and value == int(text)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[" + HUGE + "]", "has 256000 digits (at most 20)"),
        ("[-" + "9" * 5000 + "]", "has 5000 digits"),
        ("[" * 100000, "nested too deeply"),
        ("[{", "character 2: invalid JSON"),
    ],
)
def test_json_that_cannot_be_read_is_a_codec_error_naming_the_annotation(
    text: str, problem: str
) -> None:
    with pytest.raises(CodecError) as caught:
        read_json(text, "hami.io/some-annotation")
    message = str(caught.value)
    assert message.startswith("annotation hami.io/some-annotation: ") and problem in message
    assert len(message) < 300


def test_json_with_ordinary_numbers_reads_as_before() -> None:
    assert read_json('[1, -2, 3.5, {"a": 12345678901234567890}]', "x") == [
        1,
        -2,
        3.5,
        {"a": 12345678901234567890},
    ]


# every annotation decoder refuses them the same way --------------------------------------------

REGISTER = "hami.io/node-nvidia-register"
SCORES = "hami.io/node-nvidia-score"
MIG = "hami.io/vgpu-mig-allocations"
GRANTS = "hami.io/vgpu-devices-allocated"
Decoder = Callable[[str], object]


@pytest.mark.parametrize(
    ("decode", "text", "annotation"),
    [
        pytest.param(decode_node_devices, '[{"id": "GPU-a", "count": ' + HUGE + "}]", REGISTER),
        pytest.param(decode_node_devices, "[" * 5000, REGISTER, id="register-nesting"),
        pytest.param(decode_node_devices, f"GPU-a,{HUGE},100,100,T,0,true:", REGISTER),
        pytest.param(decode_pair_scores, '[{"uuid": "a", "score": {"b": ' + HUGE + "}}]", SCORES),
        pytest.param(decode_mig_allocations, '[{"containerIndex": ' + "9" * 5000 + "}]", MIG),
        pytest.param(decode_mig_allocations, "[" * 5000, MIG, id="mig-nesting"),
        pytest.param(decode_pod_grants, f"GPU-a,NVIDIA,{HUGE},0:;", GRANTS),
        pytest.param(decode_pod_grants, f"GPU-a,NVIDIA,{HUGE}:;", GRANTS, id="grant-3-fields"),
    ],
)
def test_every_annotation_decoder_refuses_huge_numbers_and_deep_nesting_briefly(
    decode: Decoder, text: str, annotation: str
) -> None:
    with pytest.raises(CodecError) as caught:
        decode(text)
    message = str(caught.value)
    assert message.startswith(f"annotation {annotation}: ")
    assert len(message) < 400  # the value is cut short, not echoed
