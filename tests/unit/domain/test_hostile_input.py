"""Hostile input (issue 8, item 9): register and grant annotations a node or tenant wrote, and
quantities a tenant typed, are refused with a typed error that says what and where; they never
raise anything else, never round to a different request, and never read as other cards."""

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.domain.builders import container, manifest, pod
from vgpu.domain import (
    NVIDIA,
    AdmissionConfig,
    CodecError,
    Device,
    RequestError,
    admit,
    decode_node_devices,
    decode_pod_grants,
    encode_node_devices,
    encode_pod_grants,
    parse_request,
)
from vgpu.domain.quantity import MAX_EXPONENT, memory_mib, parse_quantity

REGISTER = "hami.io/node-nvidia-register"
RESOURCES = {
    "gpu": NVIDIA.count_resource,
    "mem": NVIDIA.memory_resource,
    "pct": NVIDIA.memory_percentage_resource,
    "cores": NVIDIA.cores_resource,
}


def _json_register(*ids: str) -> str:
    return json.dumps([{"id": i, "count": 10, "devmem": 1000, "health": True} for i in ids])


# register decode ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_id", ["GPU-a,GPU-b", "GPU-a:x", "GPU-a;", "GPU a", "GPU-a\t", "GPU-\x00a", "GPU-\u200ba"]
)
def test_a_register_id_holding_a_separator_or_invisible_character_is_refused(bad_id: str) -> None:
    with pytest.raises(CodecError) as caught:
        decode_node_devices(_json_register("GPU-ok", bad_id))
    message = str(caught.value)
    assert REGISTER in message and "device #1" in message and repr(bad_id) in message


@pytest.mark.parametrize("bad_id", ["GPU-a;b", "GPU a", "GPU-\x01"])
def test_a_csv_register_id_holding_a_separator_is_refused(bad_id: str) -> None:
    with pytest.raises(CodecError, match="device #0: card id"):
        decode_node_devices(f"{bad_id},10,100,100,T,0,true:")


def test_an_empty_register_id_is_refused() -> None:
    with pytest.raises(CodecError, match="device #0: missing the card id"):
        decode_node_devices(_json_register(""))
    with pytest.raises(CodecError, match="device #0: empty card id"):
        decode_node_devices(",10,100,100,T,0,true:")


@pytest.mark.parametrize(
    "text",
    [
        _json_register("GPU-a", "GPU-b", "GPU-a"),
        "GPU-a,10,100,100,T,0,true:GPU-b,10,100,100,T,0,true:GPU-a,10,100,100,T,0,true:",
    ],
)
def test_a_uuid_registered_twice_is_refused_naming_both_positions(text: str) -> None:
    with pytest.raises(CodecError) as caught:
        decode_node_devices(text)
    assert str(caught.value) == (
        f"annotation {REGISTER}: device #2: card id 'GPU-a' is already listed as device #0"
    )


# grant decode ------------------------------------------------------------------------------


def test_a_container_naming_one_card_twice_is_refused() -> None:
    with pytest.raises(CodecError) as caught:
        decode_pod_grants(";GPU-a,NVIDIA,100,0:GPU-b,NVIDIA,100,0:GPU-a,NVIDIA,100,0:;")
    assert "container #1, card #2: card id 'GPU-a' is already listed as container #1, card #0" in (
        str(caught.value)
    )


def test_two_containers_may_share_one_card() -> None:
    grants = decode_pod_grants("GPU-a,NVIDIA,100,0:;GPU-a,NVIDIA,200,0:;")
    assert [g.uuid for c in grants for g in c] == ["GPU-a", "GPU-a"]


def test_a_grant_id_with_whitespace_is_refused() -> None:
    with pytest.raises(CodecError, match="container #0, card #0: card id 'GPU a'"):
        decode_pod_grants("GPU a,NVIDIA,100,0:;")


# quantities --------------------------------------------------------------------------------

HOSTILE_QUANTITIES = [
    "1e999999Gi",
    "9" * 5000,
    "1e-999999999",
    "1e99999999999999999999",
    "-1",
    "-0.5Gi",
    "NaN",
    "nan",
    "Infinity",
    "-inf",
    "1e",
    "..5",
    "0x10",
    "1_000",
    "١٢",  # Arabic-Indic digits: Decimal would read them, Kubernetes does not
    "1.5",
    "0.1Mi",
    "1e-9",
    10**40,
    -(10**40),
    True,
]


@pytest.mark.parametrize("resource", RESOURCES)
@pytest.mark.parametrize("value", HOSTILE_QUANTITIES, ids=lambda v: repr(v)[:24])
def test_a_hostile_quantity_is_a_request_error_naming_container_resource_and_value(
    resource: str, value: object
) -> None:
    with pytest.raises(RequestError) as caught:
        parse_request(pod(container("cuda", **{resource: value})).containers[0], NVIDIA)
    error = caught.value
    assert (error.container, error.resource, error.value) == ("cuda", RESOURCES[resource], value)
    assert str(error).startswith(f"container 'cuda': {RESOURCES[resource]}=")
    assert len(str(error)) < 300  # a 5000-digit value is cut short, not echoed


@pytest.mark.parametrize("value", ["1e999999Gi", "9" * 5000, "1e-999999999", "NaN"])
def test_the_webhook_denies_a_hostile_quantity_instead_of_failing(value: str) -> None:
    decision = admit(manifest(container("cuda", gpu=1, mem=value)), AdmissionConfig())
    assert not decision.allowed
    assert "container 'cuda': nvidia.com/gpumem=" in decision.message


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("1e-999999999", "out of range"),
        ("1e-9", "not a whole number of MiB"),
        ("0.5", "not a whole number of MiB"),
        ("512Ki", "not a whole number of MiB"),
    ],
)
def test_a_tiny_memory_request_is_refused_never_read_as_a_whole_card(
    value: str, problem: str
) -> None:
    with pytest.raises(RequestError, match=problem):
        parse_request(pod(container(gpu=1, mem=value)).containers[0], NVIDIA)


@pytest.mark.parametrize(("resource", "value"), [("pct", "50.5"), ("cores", "0.1"), ("gpu", "1.5")])
def test_fractions_of_percent_or_cards_are_refused(resource: str, value: str) -> None:
    with pytest.raises(RequestError, match="must be a whole number"):
        parse_request(pod(container(**{resource: value})).containers[0], NVIDIA)


@pytest.mark.parametrize(
    ("text", "mib"),
    [("1e3", 1000), ("1E+2", 100), ("+5", 5), ("1.", 1), (".5Gi", 512), ("1e30", 10**30)],
)
def test_valid_quantities_at_the_edges_still_parse_exactly(text: str, mib: int) -> None:
    assert memory_mib(text) == mib


# properties --------------------------------------------------------------------------------

numbers = st.one_of(
    st.text("0123456789", max_size=40),
    st.just("9" * 5000),
    st.builds(
        lambda a, b: f"{a}.{b}",
        st.text("0123456789", max_size=8),
        st.text("0123456789", max_size=8),
    ),
)
quantity_texts = st.one_of(
    st.builds(
        lambda sign, number, exponent, suffix: f"{sign}{number}{exponent}{suffix}",
        st.sampled_from(["", "+", "-"]),
        numbers,
        st.one_of(st.just(""), st.integers(-(10**12), 10**12).map(lambda e: f"e{e}")),
        st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "Ei", "X", "iB"]),
    ),
    st.text(max_size=30),
    st.integers(),
    st.floats(),
)


@settings(max_examples=300, deadline=None)
@given(quantity_texts)
def test_a_quantity_is_exact_and_bounded_or_a_value_error(text: Any) -> None:
    try:
        value = parse_quantity(text)
    except ValueError:
        return
    assert isinstance(value, Decimal) and value.is_finite()
    assert value == 0 or abs(value.adjusted()) <= MAX_EXPONENT + 19  # 2**60 at most on top


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(RESOURCES)), quantity_texts)
def test_any_request_value_parses_within_bounds_or_is_a_request_error(
    resource: str, text: Any
) -> None:
    try:
        request = parse_request(pod(container(**{resource: text})).containers[0], NVIDIA)
    except RequestError:
        return
    if request is None:
        return
    assert 1 <= request.count <= 1 << 16
    assert 0 <= request.memory <= 2**31 - 1 and 0 <= request.cores <= 100
    assert 0 <= request.memory_percent <= 100
    if resource == "mem" and memory_mib(text) > 0:
        assert request.memory == memory_mib(text)  # exactly what was asked, never "whole card"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_register_text_decodes_to_distinct_clean_ids_or_a_codec_error(text: str) -> None:
    try:
        devices = decode_node_devices(text)
    except CodecError:
        return
    _assert_clean(devices)


ids = st.text(max_size=12)
raw_devices = st.lists(
    st.fixed_dictionaries(
        {"id": ids},
        optional={
            "count": st.integers(-5, 2**33),
            "devmem": st.one_of(st.integers(-5, 2**33), st.text(max_size=3), st.booleans()),
            "health": st.one_of(st.booleans(), st.none()),
            "numa": st.integers(-3, 3),
        },
    ),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(raw_devices)
def test_any_json_register_decodes_to_distinct_clean_ids_or_a_codec_error(
    items: list[dict[str, Any]],
) -> None:
    try:
        devices = decode_node_devices(json.dumps(items))
    except CodecError:
        return
    _assert_clean(devices)
    assert decode_node_devices(encode_node_devices(devices)) == devices


def _assert_clean(devices: list[Device]) -> None:
    uuids = [d.uuid for d in devices]
    assert len(set(uuids)) == len(uuids)
    for uuid in uuids:
        assert uuid and uuid.isprintable() and not any(c in ",:;" or c.isspace() for c in uuid)


grant_texts = st.one_of(
    st.text(max_size=80),
    st.lists(
        st.lists(
            st.builds(
                lambda u, m, c: f"{u},NVIDIA,{m},{c}:",
                st.sampled_from(["GPU-a", "GPU-b", "GPU c", ""]),
                st.integers(-1, 2**32),
                st.integers(-1, 101),
            ),
            max_size=3,
        ).map("".join),
        max_size=3,
    ).map(lambda segments: "".join(s + ";" for s in segments)),
)


@settings(max_examples=300, deadline=None)
@given(grant_texts)
def test_any_grant_text_decodes_to_one_entry_per_card_or_a_codec_error(text: str) -> None:
    try:
        grants = decode_pod_grants(text)
    except CodecError:
        return
    for container_grants in grants:
        uuids = [g.uuid for g in container_grants]
        assert len(set(uuids)) == len(uuids)
    assert decode_pod_grants(encode_pod_grants(grants)) == grants
