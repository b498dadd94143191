"""The occupancy record on a Node: its text, what a bad one does, and how a write changes it."""

import doctest
import json

from hypothesis import given
from hypothesis import strategies as st

from vgpu.domain.trust import (
    GrantClaim,
    OccupancyEntry,
    decode_occupancy_record,
    occupancy_record,
    updated_occupancy_record,
)
from vgpu.domain.trust.occupancy_record import encode_occupancy_record

A = OccupancyEntry("default/a", "1750000000", "GPU-0,NVIDIA,1000,10:;")
B = OccupancyEntry("team/b", "1750000001", "GPU-1,NVIDIA,2000,0:;", '[{"containerIndex":0}]')


def test_entries_read_back_as_written_and_give_the_grant_claim_back() -> None:
    text = encode_occupancy_record({"ua": A, "ub": B})

    assert decode_occupancy_record(text).entries == {"ua": A, "ub": B}
    assert decode_occupancy_record(text).problems == ()
    assert B.claim("ub", "n1") == GrantClaim(
        "ub", "n1", "1750000001", "GPU-1,NVIDIA,2000,0:;", '[{"containerIndex":0}]'
    )
    assert OccupancyEntry.of("team/b", B.claim("ub", "n1")) == B


def test_the_same_entries_always_give_the_same_text() -> None:
    assert encode_occupancy_record({"ua": A, "ub": B}) == encode_occupancy_record({"ub": B, "ua": A})
    assert '"mig"' not in encode_occupancy_record({"ua": A})  # only grants with MIG instances carry it


def test_no_record_reads_as_empty() -> None:
    assert decode_occupancy_record(None).entries == {} and decode_occupancy_record("").problems == ()


def test_a_record_that_does_not_read_is_reported_never_raised() -> None:
    for text, problem in (
        ("{not json", "is not JSON"),
        ("[1, 2]", 'must be an object with "pods"'),
        ('{"v":1,"pods":[]}', 'must be an object with "pods"'),
        ('{"v":2,"pods":{}}', "has version 2, not 1"),
        ("[" * 100_000 + "]" * 100_000, "is not JSON"),  # nested past the parser's depth
    ):
        record = decode_occupancy_record(text)
        assert record.entries == {}
        assert len(record.problems) == 1 and problem in record.problems[0], (text[:20], record)


def test_an_entry_that_does_not_read_is_skipped_and_the_others_kept() -> None:
    pods = {
        "ua": {"pod": "default/a", "time": "1750000000", "allocated": A.allocated},
        "ux": {"pod": "default/x", "allocated": 7},
        "uy": "nonsense",
        "uz": {"pod": "", "allocated": "GPU-0,NVIDIA,1,0:;"},
    }
    record = decode_occupancy_record(json.dumps({"v": 1, "pods": pods}))

    assert record.entries == {"ua": A}
    assert [p.split("'")[1] for p in record.problems] == ["ux", "uy", "uz"]


@given(st.text(max_size=300))
def test_any_text_decodes_without_raising(text: str) -> None:
    decode_occupancy_record(text)


def test_a_write_adds_entries_and_drops_those_of_ended_pods() -> None:
    change = updated_occupancy_record(encode_occupancy_record({"ua": A}), {"ub": B}, drop={"ua"})

    assert change.text is not None and decode_occupancy_record(change.text).entries == {"ub": B}
    assert change.left_out == ()


def test_a_write_that_changes_nothing_writes_nothing() -> None:
    text = encode_occupancy_record({"ua": A})
    assert updated_occupancy_record(text, {"ua": A}).text is None
    assert updated_occupancy_record(None, {}).text is None
    assert updated_occupancy_record(text, {}, drop={"unknown"}).text is None


def test_a_record_that_does_not_read_is_replaced_by_the_entries_written() -> None:
    change = updated_occupancy_record("{broken", {"ua": A})
    assert change.text == encode_occupancy_record({"ua": A})


def test_entries_past_the_size_bound_are_left_out_and_the_rest_still_applies() -> None:
    text = encode_occupancy_record({"ua": A, "ub": B})
    bound = len(encode_occupancy_record({"ua": A})) + 10

    change = updated_occupancy_record(text, {"uc": A, "ua": A}, drop={"ub"}, limit=bound)

    assert change.left_out == ("uc",)  # "ua" is already there as asked: not left out
    assert change.text is not None and decode_occupancy_record(change.text).entries == {"ua": A}
    assert change.wanted_size == len(encode_occupancy_record({"ua": A, "uc": A})) > bound


def test_the_module_examples_hold() -> None:
    assert doctest.testmod(occupancy_record).failed == 0
