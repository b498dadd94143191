"""The occupancy record on a Node: its text, its bounds, what a bad one does, and how a write
changes it. Every field of an entry comes from a pod's annotations, which a tenant can write
(their namespace and name, `hami.io/vgpu-time`, the device list, the MIG reservations): none
reaches the record unparsed or unbounded."""

import doctest
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.domain.trust import (
    MAX_ENTRY_BYTES,
    GrantClaim,
    OccupancyEntry,
    OverflowName,
    decode_occupancy_record,
    occupancy_record,
    updated_occupancy_record,
)
from vgpu.domain.trust.occupancy_record import encode_occupancy_record, recordable_time

A = OccupancyEntry("default/a", "1750000000", "GPU-0,NVIDIA,1000,10:;")
B = OccupancyEntry("team/b", "1750000001", "GPU-1,NVIDIA,2000,0:;", '[{"containerIndex":0}]')


def entry_of(pod: str = "default/t", time: str = "1750000000", allocated: str = "", mig: str = "") -> OccupancyEntry:
    claim = GrantClaim("u", "n1", time, allocated or "GPU-0,NVIDIA,100,0:;", mig)
    return OccupancyEntry.of(pod, claim)


def named(entry: OccupancyEntry) -> OverflowName:
    return OverflowName.of(entry)


def test_entries_read_back_as_written_and_give_the_grant_claim_back() -> None:
    text = encode_occupancy_record({"ua": A, "ub": B})

    assert decode_occupancy_record(text).entries == {"ua": A, "ub": B}
    assert decode_occupancy_record(text).problems == ()
    assert B.claim("ub", "n1") == GrantClaim(
        "ub", "n1", "1750000001", "GPU-1,NVIDIA,2000,0:;", '[{"containerIndex":0}]'
    )
    assert OccupancyEntry.of("team/b", B.claim("ub", "n1")) == B


def test_the_time_is_written_as_a_number() -> None:
    data = json.loads(encode_occupancy_record({"ua": A}))
    assert data["v"] == 2 and data["pods"]["ua"]["time"] == 1750000000


def test_the_same_entries_always_give_the_same_text() -> None:
    assert encode_occupancy_record({"ua": A, "ub": B}) == encode_occupancy_record({"ub": B, "ua": A})
    assert '"mig"' not in encode_occupancy_record({"ua": A})  # only grants with MIG instances carry it
    assert '"overflow"' not in encode_occupancy_record({"ua": A})  # only when a pod is in it


@given(
    st.dictionaries(st.text(min_size=1), st.tuples(st.text(min_size=1), st.text(), st.text())),
    st.dictionaries(st.text(min_size=1), st.tuples(st.text(min_size=1), st.booleans())),
)
def test_the_text_is_json_with_sorted_keys_and_no_spaces(
    pods: dict[str, tuple[str, str, str]], names: dict[str, tuple[str, bool]]
) -> None:
    overflow = {uid: OverflowName(pod, "d" * 32 if digest else "") for uid, (pod, digest) in names.items()}
    entries = {uid: OccupancyEntry(pod, "1750000000", allocated, mig) for uid, (pod, allocated, mig) in pods.items()}
    document: dict[str, object] = {
        "v": 2,
        "pods": {
            uid: {"pod": e.pod, "allocated": e.allocated, "time": 1750000000}
            | ({"mig": e.mig_reservations} if e.mig_reservations else {})
            for uid, e in entries.items()
        },
    }
    if overflow:
        document["overflow"] = {
            uid: {"pod": n.pod, "grant": n.grant} if n.grant else n.pod for uid, n in overflow.items()
        }
    expected = json.dumps(document, separators=(",", ":"), sort_keys=True)
    assert encode_occupancy_record(entries, overflow) == expected


def test_no_record_reads_as_empty() -> None:
    assert decode_occupancy_record(None).entries == {} and decode_occupancy_record("").problems == ()


@pytest.mark.parametrize(
    ("text", "time"),
    [
        ("1750000000", "1750000000"),
        ("0", "0"),
        ("9223372036854775807", "9223372036854775807"),  # Go's int64 at most
        ("9223372036854775808", ""),
        ("1" * 130_851, ""),  # the issue's: it filled the record
        ("+1750000000", ""),  # Go reads these, but no scheduler writes them
        ("01750000000", ""),
        ("-1", ""),
        (" 1750000000", ""),
        ("1e9", ""),
        ("\u0661\u0667", ""),  # Arabic-Indic digits: digits, but not ASCII ones
        ("", ""),
    ],
)
def test_a_time_is_recorded_only_as_the_schedulers_write_it(text: str, time: str) -> None:
    assert recordable_time(text) == time
    assert entry_of(time=text).assigned_time == time
    data = json.loads(encode_occupancy_record({"u": entry_of(time=text)}))
    assert data["pods"]["u"].get("time") == (int(time) if time else None)


def test_a_grant_without_a_time_that_reads_gets_back_a_claim_without_one() -> None:
    entry = entry_of(time="soon")
    decoded = decode_occupancy_record(encode_occupancy_record({"u": entry})).entries["u"]
    assert decoded == entry and decoded.claim("u", "n1").assigned_time == ""


def test_a_record_that_does_not_read_is_reported_never_raised() -> None:
    for text, problem in (
        ("{not json", "invalid JSON"),
        ("[1, 2]", 'must be an object with "pods"'),
        ('{"v":2,"pods":[]}', 'must be an object with "pods"'),
        ('{"v":3,"pods":{}}', "has version 3, not 1 or 2"),
        ('{"v":true,"pods":{}}', "has version True, not 1 or 2"),
        ('{"v":2,"pods":{},"n":' + "9" * 5000 + "}", "has 5000 digits"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ):
        record = decode_occupancy_record(text)
        assert record.entries == {}
        assert len(record.problems) == 1 and problem in record.problems[0], (text[:20], record)


def test_an_entry_that_does_not_read_is_skipped_and_the_others_kept() -> None:
    pods = {
        "ua": {"pod": "default/a", "time": 1750000000, "allocated": A.allocated},
        "ux": {"pod": "default/x", "allocated": 7},
        "uy": "nonsense",
        "uz": {"pod": "", "allocated": "GPU-0,NVIDIA,1,0:;"},
        "uw": {"pod": "default/" + "w" * 400, "allocated": "GPU-0,NVIDIA,1,0:;"},
        "u" * 200: {"pod": "default/long-uid", "allocated": "GPU-0,NVIDIA,1,0:;"},
    }
    record = decode_occupancy_record(json.dumps({"v": 2, "pods": pods}))

    assert record.entries == {"ua": A}
    assert [p.split("'")[1] for p in record.problems[:4]] == ["ux", "uy", "uz", "uw"]
    assert "has no pod uid of 1 to 128 characters" in record.problems[4]


def test_a_recorded_time_that_is_not_one_is_left_out_and_the_entry_kept() -> None:
    for time in ("1" * 20, -5, 1.5, True, "+1", {"x": 1}):
        pods = {"ua": {"pod": "default/a", "time": time, "allocated": A.allocated}}
        record = decode_occupancy_record(json.dumps({"v": 2, "pods": pods}))
        assert record.entries == {"ua": OccupancyEntry("default/a", "", A.allocated)}, time
        assert "is not a whole number of seconds" in record.problems[0]


def test_a_version_1_record_reads_and_its_huge_time_is_left_out() -> None:
    pods = {
        "ua": {"pod": "default/a", "time": "1750000000", "allocated": A.allocated},
        "uf": {"pod": "default/f", "time": "1" * 130_851, "allocated": A.allocated},
    }
    text = json.dumps({"v": 1, "pods": pods})

    record = decode_occupancy_record(text)
    assert record.entries == {"ua": A, "uf": OccupancyEntry("default/f", "", A.allocated)}
    rewritten = updated_occupancy_record(text, {}, decoded=record).text
    assert rewritten is not None and len(rewritten) < 300


def test_the_overflow_reads_back_and_a_pod_with_an_entry_is_not_in_it() -> None:
    digest = B.digest
    text = json.dumps(
        {
            "v": 2,
            "pods": {"ua": {"pod": "default/a", "allocated": A.allocated}},
            "overflow": {
                "ua": {"pod": "default/a", "grant": A.digest},
                "ub": {"pod": "team/b", "grant": digest},
                "uc": 7,
                "": "default/x",
                "ud": {"pod": "team/d", "grant": "short"},
                "ue": "team/e",  # as written before digests were kept: matches no annotations
            },
        }
    )
    record = decode_occupancy_record(text)
    assert record.overflow == {"ub": OverflowName("team/b", digest), "ue": OverflowName("team/e")}
    assert len(record.problems) == 3
    assert decode_occupancy_record('{"v":2,"pods":{},"overflow":[]}').problems


def test_a_name_in_the_overflow_keeps_a_digest_only_the_same_grant_has() -> None:
    edited = OccupancyEntry(B.pod, B.assigned_time, "GPU-1,NVIDIA,1,0:;", B.mig_reservations)
    retimed = OccupancyEntry(B.pod, "1750000002", B.allocated, B.mig_reservations)
    assert len(B.digest) == 32 and int(B.digest, 16) >= 0
    assert OccupancyEntry(B.pod, B.assigned_time, B.allocated, B.mig_reservations).digest == B.digest
    assert len({B.digest, edited.digest, retimed.digest, A.digest}) == 4


@given(st.text(max_size=300))
def test_any_text_decodes_without_raising(text: str) -> None:
    decode_occupancy_record(text)


def test_a_write_adds_entries_and_drops_those_of_ended_pods() -> None:
    before = encode_occupancy_record({"ua": A}, {"ux": OverflowName("default/x", A.digest)})
    change = updated_occupancy_record(before, {"ub": B}, drop={"ua", "ux"})

    assert change.text is not None
    assert decode_occupancy_record(change.text).entries == {"ub": B}
    assert decode_occupancy_record(change.text).overflow == {}
    assert change.left_out == ()


def test_a_write_that_changes_nothing_writes_nothing() -> None:
    text = encode_occupancy_record({"ua": A})
    assert updated_occupancy_record(text, {"ua": A}).text is None
    assert updated_occupancy_record(None, {}).text is None
    assert updated_occupancy_record(text, {}, drop={"unknown"}).text is None


def test_a_record_that_does_not_read_is_replaced_by_the_entries_written() -> None:
    change = updated_occupancy_record("{broken", {"ua": A})
    assert change.text == encode_occupancy_record({"ua": A})


def test_an_entry_of_a_pod_named_in_the_overflow_takes_it_out_of_there() -> None:
    change = updated_occupancy_record(encode_occupancy_record({}, {"ua": named(A)}), {"ua": A})
    assert change.text == encode_occupancy_record({"ua": A})


@pytest.mark.parametrize(
    "field", ["allocated", "mig"], ids=["hami.io/vgpu-devices-allocated", "MIG reservations"]
)
def test_an_entry_over_its_bound_is_named_in_the_overflow_not_copied(field: str) -> None:
    hostile = "G" * MAX_ENTRY_BYTES
    entry = entry_of(**{field: hostile})

    change = updated_occupancy_record(encode_occupancy_record({"ua": A}), {"ut": entry})

    assert change.text is not None and hostile not in change.text
    assert change.entries == {"ua": A} and change.overflow == {"ut": named(entry)}
    assert change.left_out == ("ut",)
    assert change.wanted_size == len(encode_occupancy_record({"ua": A, "ut": entry}))


def test_past_the_record_s_bound_the_largest_entries_go_to_the_overflow_first() -> None:
    small = entry_of(pod="default/small")
    mid = entry_of(pod="default/mid", allocated="GPU-0,NVIDIA,100,0:" + "GPU-9,NVIDIA,0,0:" * 20)
    large = entry_of(pod="default/large", allocated="GPU-0,NVIDIA,100,0:" + "GPU-9,NVIDIA,0,0:" * 40)
    text = encode_occupancy_record({"ul": large, "um": mid})
    bound = len(encode_occupancy_record({"um": mid, "us": small}, {"ul": named(large)}))

    change = updated_occupancy_record(text, {"us": small}, limit=bound)

    assert change.entries == {"um": mid, "us": small}  # the small newcomer got in
    assert change.overflow == {"ul": named(large)}
    assert change.left_out == ("ul",)
    assert change.text is not None and len(change.text) <= bound
    assert change.wanted_size == len(encode_occupancy_record({"ul": large, "um": mid, "us": small}))


def test_among_entries_of_one_size_those_asked_for_go_to_the_overflow_first() -> None:
    allocated = "GPU-0,NVIDIA,1000,10:" * 10
    first = OccupancyEntry("default/a", "1750000000", allocated)
    newcomer = OccupancyEntry("default/b", "1750000000", allocated)  # the same size
    text = encode_occupancy_record({"ua": first})
    bound = len(encode_occupancy_record({"ua": first}, {"ub": named(newcomer)}))

    change = updated_occupancy_record(text, {"ub": newcomer}, limit=bound)

    assert change.entries == {"ua": first} and change.overflow == {"ub": named(newcomer)}
    again = updated_occupancy_record(change.text, {"ub": newcomer}, limit=bound)
    assert again.text is None and again.left_out == ("ub",)  # asked again: still no room


def test_names_that_do_not_fit_even_the_overflow_are_said_to_be_unlisted() -> None:
    change = updated_occupancy_record(None, {"ua": A, "ub": B}, limit=110)

    assert change.entries == {} and len(change.unlisted) >= 1
    assert change.text is not None and len(change.text) <= 110
    assert set(change.overflow) | set(change.unlisted) == {"ua", "ub"}


@given(
    time=st.text(max_size=200),
    allocated=st.text(min_size=1, max_size=2 * MAX_ENTRY_BYTES),
    mig=st.text(max_size=2 * MAX_ENTRY_BYTES),
    pods=st.integers(min_value=1, max_value=40),
)
def test_whatever_a_tenant_writes_the_record_stays_in_its_bounds(
    time: str, allocated: str, mig: str, pods: int
) -> None:
    add = {f"u{i}": entry_of(f"default/p{i}", time, allocated, mig) for i in range(pods)}
    limit = 8 * 1024

    change = updated_occupancy_record(None, add, limit=limit)

    assert change.text is not None and len(change.text) <= limit
    record = decode_occupancy_record(change.text)
    assert record.problems == ()
    assert set(record.entries) | set(record.overflow) | set(change.unlisted) == set(add)
    for uid, entry in record.entries.items():
        raw = json.loads(change.text)["pods"][uid]
        assert len(json.dumps({uid: raw}, separators=(",", ":"))) - 2 <= MAX_ENTRY_BYTES
        assert raw.get("time") is None or isinstance(raw["time"], int)
        assert entry == add[uid]


def test_the_module_examples_hold() -> None:
    assert doctest.testmod(occupancy_record).failed == 0
