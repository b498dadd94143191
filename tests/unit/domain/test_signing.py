import pytest

from vgpu.domain.trust import GrantClaim, KeyRing, SigningError, grant_claim
from vgpu.domain.vendor import NVIDIA

KEY_A = b"a" * 32
KEY_B = b"b" * 32
CLAIM = GrantClaim("uid-1", "node-a", "1700000000", "GPU-1,NVIDIA,1000,10:;")


def test_a_signature_verifies_for_exactly_its_claim() -> None:
    ring = KeyRing({"k1": KEY_A})
    signature = ring.sign(CLAIM)
    assert ring.verify(signature, CLAIM)
    for other in (
        GrantClaim("uid-2", CLAIM.node, CLAIM.assigned_time, CLAIM.allocated),
        GrantClaim(CLAIM.pod_uid, "node-b", CLAIM.assigned_time, CLAIM.allocated),
        GrantClaim(CLAIM.pod_uid, CLAIM.node, "1700000001", CLAIM.allocated),
        GrantClaim(CLAIM.pod_uid, CLAIM.node, CLAIM.assigned_time, "GPU-1,NVIDIA,9000,10:;"),
    ):
        assert not ring.verify(signature, other)


def test_field_boundaries_cannot_be_shifted() -> None:
    ring = KeyRing({"k1": KEY_A})
    one = GrantClaim("a", "b,c", "1", "x")
    two = GrantClaim("a,b", "c", "1", "x")
    assert not ring.verify(ring.sign(one), two)


def test_the_greatest_key_signs_and_every_key_verifies() -> None:
    old = KeyRing({"2026-01": KEY_A})
    rotated = KeyRing({"2026-01": KEY_A, "2026-06": KEY_B})
    assert rotated.active == "2026-06"
    assert rotated.sign(CLAIM).startswith("2026-06:")
    assert rotated.verify(old.sign(CLAIM), CLAIM)
    assert not old.verify(rotated.sign(CLAIM), CLAIM)


@pytest.mark.parametrize("signature", [None, "", "k1", "k9:abc", "k1:", "k1:" + "A" * 43])
def test_missing_unknown_or_wrong_signatures_are_refused(signature: str | None) -> None:
    assert not KeyRing({"k1": KEY_A}).verify(signature, CLAIM)


def test_another_key_with_the_same_name_does_not_verify() -> None:
    signature = KeyRing({"k1": KEY_A}).sign(CLAIM)
    assert not KeyRing({"k1": KEY_B}).verify(signature, CLAIM)


@pytest.mark.parametrize(
    ("keys", "words"),
    [
        ({"k1": b"short"}, "at least 32"),
        ({"bad name": KEY_A}, "'bad name'"),
        ({"": KEY_A}, "''"),
    ],
)
def test_bad_keys_are_refused_with_their_name(keys: dict[str, bytes], words: str) -> None:
    with pytest.raises(SigningError, match=words):
        KeyRing(keys)


def test_an_empty_ring_cannot_sign() -> None:
    with pytest.raises(SigningError, match="empty"):
        KeyRing().sign(CLAIM)


RESERVED = (
    '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-1","profile":"2g.10gb",'
    '"placement":{"start":2,"size":2}}]'
)
ANNOTATIONS = {
    "hami.io/vgpu-node": "node-a",
    "hami.io/vgpu-time": "1700000000",
    "hami.io/vgpu-devices-allocated": "GPU-1,NVIDIA,9984,28:;",
    "hami.io/vgpu-mig-allocations": RESERVED,
}


def test_mig_reservations_are_signed_but_runtime_identity_added_later_is_not() -> None:
    ring = KeyRing({"k1": KEY_A})
    claim = grant_claim("uid-1", ANNOTATIONS, NVIDIA)
    assert claim is not None
    signature = ring.sign(claim)
    realized = RESERVED.replace(
        "}}]", '},"migUUID":"MIG-9","gpuInstanceID":3,"computeInstanceID":0}]'
    )
    after_allocate = {**ANNOTATIONS, "hami.io/vgpu-mig-allocations": realized}
    assert ring.verify(signature, grant_claim("uid-1", after_allocate, NVIDIA))  # type: ignore[arg-type]
    moved = {
        **ANNOTATIONS,
        "hami.io/vgpu-mig-allocations": RESERVED.replace('"start":2', '"start":4'),
    }
    assert not ring.verify(signature, grant_claim("uid-1", moved, NVIDIA))  # type: ignore[arg-type]
    dropped = {k: v for k, v in ANNOTATIONS.items() if k != "hami.io/vgpu-mig-allocations"}
    assert not ring.verify(signature, grant_claim("uid-1", dropped, NVIDIA))  # type: ignore[arg-type]


def test_a_grant_without_mig_signs_as_it_did_before_mig() -> None:
    ring = KeyRing({"k1": KEY_A})
    plain = {k: v for k, v in ANNOTATIONS.items() if k != "hami.io/vgpu-mig-allocations"}
    assert grant_claim("uid-1", plain, NVIDIA) == GrantClaim(
        "uid-1", "node-a", "1700000000", "GPU-1,NVIDIA,9984,28:;"
    )
    assert ring.sign(GrantClaim("u", "n", "t", "a")) == ring.sign(
        GrantClaim("u", "n", "t", "a", "")
    )
