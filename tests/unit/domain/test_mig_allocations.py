"""`hami.io/vgpu-mig-allocations` read and written as HAMi v2.10 does."""

import pytest

from vgpu.domain.errors import CodecError
from vgpu.domain.mig import (
    MigPlacement,
    MigReservation,
    MigRuntime,
    decode_mig_allocations,
    encode_mig_allocations,
)

REALIZED = (
    '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-x","profile":"2g.10gb",'
    '"placement":{"start":2,"size":2},"migUUID":"MIG-y","gpuInstanceID":4,"computeInstanceID":0}]'
)


def test_realized_reservation_round_trips_byte_for_byte() -> None:
    (reservation,) = decode_mig_allocations(REALIZED)
    assert reservation == MigReservation(
        0, 0, "GPU-x", "2g.10gb", MigPlacement(2, 2), MigRuntime("MIG-y", 4, 0)
    )
    assert encode_mig_allocations([reservation]) == REALIZED


def test_no_reservations_is_the_empty_string() -> None:
    assert encode_mig_allocations([]) == ""
    assert decode_mig_allocations("") == ()


def test_empty_mig_uuid_and_null_ids_count_as_no_runtime_identity() -> None:
    text = REALIZED.replace('"MIG-y"', '""').replace("4", "null").replace(":0}", ":null}")
    (reservation,) = decode_mig_allocations(text)
    assert reservation.runtime is None


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("{", "invalid JSON"),
        ('{"a":1}', "not a JSON array"),
        ("[1]", "expected an object"),
        (REALIZED.replace('"gpuUUID":"GPU-x"', '"gpuUUID":""'), "gpuUUID"),
        (REALIZED.replace('"profile":"2g.10gb"', '"profile":7'), "profile"),
        (REALIZED.replace('"size":2', '"size":0'), "size is 0"),
        (REALIZED.replace('"containerIndex":0', '"containerIndex":-1'), "containerIndex=-1"),
        (REALIZED.replace('"deviceIndex":0', '"deviceIndex":true'), "deviceIndex=True"),
        (REALIZED.replace(',"computeInstanceID":0', ""), "partial runtime identity"),
        (REALIZED[:-1] + "," + REALIZED[1:], "reserved twice"),
        ("[" + ",".join(["{}"] * 40000) + "]", "too long"),
    ],
)
def test_malformed_text_is_refused_naming_what_is_wrong(text: str, names: str) -> None:
    with pytest.raises(CodecError, match=names) as caught:
        decode_mig_allocations(text)
    assert "hami.io/vgpu-mig-allocations" in str(caught.value)
