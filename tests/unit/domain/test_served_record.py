"""The served record's file format: what is written reads back, and damage is named."""

import json

import pytest

from vgpu.domain.device import Usage
from vgpu.domain.mig import MigPlacement, MigReservation, encode_mig_allocations
from vgpu.domain.trust import (
    ServedGrant,
    ServedRecordError,
    decode_served_record,
    encode_served_record,
)

NODE = "gpu-node-1"
PLAIN = ServedGrant("u1", "default/a", "GPU-a,NVIDIA,3000,30:;", served_at="2026-01-01T00:00:00Z")


def test_every_field_survives_a_round_trip_mig_and_init_containers_included() -> None:
    reservations = encode_mig_allocations([MigReservation(1, 0, "GPU-m", "3g.40gb", MigPlacement(4, 4))])
    mig = ServedGrant(
        "u2", "ml/b", ";GPU-m,NVIDIA,40192,42:;", reservations, 1, False, "2026-01-02T00:00:00Z"
    )

    node, grants = decode_served_record(encode_served_record(NODE, [PLAIN, mig]))

    assert (node, grants) == (NODE, [PLAIN, mig])
    assert grants[1].footprint() == {"GPU-m": Usage(1, 40192, 42, 0b11110000)}


def test_init_containers_count_at_their_peak_in_the_footprint() -> None:
    grant = ServedGrant("u3", "default/p", "GPU-a,NVIDIA,16000,0:;GPU-a,NVIDIA,16000,0:;", "", 1)

    assert grant.footprint() == {"GPU-a": Usage(1, 16000, 0)}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("{not json", "not JSON"),
        ("[]", "must be a JSON object, not list"),
        ('{"version": 2, "node": "n", "pods": {}}', "version 2 is not 1"),
        ('{"version": 1, "node": "n", "pods": []}', "needs a string 'node' and an object 'pods'"),
        ('{"version": 1, "node": "n", "pods": {"u": 7}}', "pods.u: must be an object"),
        ('{"version": 1, "node": "n", "pods": {"u": {"pod": 5, "allocated": "x"}}}', "pods.u.pod"),
        ('{"version": 1, "node": "n", "pods": {"u": {"pod": "p"}}}', "needs a pod uid and an allocated"),
        (
            '{"version": 1, "node": "n", "pods": {"u": {"pod": "p", "allocated": "GPU-a", "init_containers": -1}}}',
            "pods.u.init_containers",
        ),
        (
            '{"version": 1, "node": "n", "pods": {"u": {"pod": "p", "allocated": "GPU-a", "signed": "yes"}}}',
            "pods.u.signed",
        ),
        (
            '{"version": 1, "node": "n", "pods": {"u": {"pod": "d/p", "allocated": "GPU-a,NVIDIA,lots,0:;"}}}',
            "pod d/p \\(u\\): annotation hami.io/vgpu-devices-allocated",
        ),
    ],
)
def test_a_damaged_record_is_refused_naming_what_is_wrong(text: str, named: str) -> None:
    with pytest.raises(ServedRecordError, match=named):
        decode_served_record(text)


def test_the_text_is_plain_json_a_person_or_checker_can_read() -> None:
    record = json.loads(encode_served_record(NODE, [PLAIN]))

    assert record == {
        "version": 1,
        "node": NODE,
        "pods": {
            "u1": {
                "pod": "default/a",
                "allocated": "GPU-a,NVIDIA,3000,30:;",
                "served_at": "2026-01-01T00:00:00Z",
            }
        },
    }
