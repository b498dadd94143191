"""The scheduler's key ring: created once, shared, refreshed so that a rotation is picked up."""

from datetime import UTC, datetime

from tests.unit.scheduler.builders import A40_UUIDS, KEYS, a40_node, manifest, signed, world
from vgpu.adapters.fake.keys import FakeGrantKeys
from vgpu.app.key_ring import new_key_ring
from vgpu.app.scheduler.keys import GrantKeys
from vgpu.domain.trust import GrantClaim, KeyRing

NOW = datetime(2026, 11, 26, 5, 30, 12, tzinfo=UTC)
CLAIM = GrantClaim("uid", "node1", "1750000000", "GPU-a,NVIDIA,1000,0:;")


def test_a_new_ring_has_one_random_key_named_by_the_utc_minute() -> None:
    ring = new_key_ring(NOW)
    assert list(ring.keys) == ["k20261126t0530"]
    assert len(ring.keys["k20261126t0530"]) == 32
    assert new_key_ring(NOW).keys != ring.keys


def test_the_first_replica_creates_the_ring_and_the_next_one_reads_it() -> None:
    store = FakeGrantKeys()
    first = GrantKeys(store, lambda: NOW).ensure()
    second = GrantKeys(store, lambda: NOW).ensure()
    assert first == second == store.ring


def test_a_refresh_picks_up_a_rotation_and_old_grants_still_verify() -> None:
    store = FakeGrantKeys(KeyRing({"k1": b"a" * 32}))
    keys = GrantKeys(store)
    keys.ensure()
    ring = keys.ring()
    assert ring is not None
    old_signature = ring.sign(CLAIM)
    store.ring = KeyRing({"k1": b"a" * 32, "k2": b"b" * 32})
    keys.refresh()
    rotated = keys.ring()
    assert rotated is not None and rotated.active == "k2"
    assert rotated.sign(CLAIM).startswith("k2:")
    assert rotated.verify(old_signature, CLAIM)


def test_a_grant_signed_with_a_key_not_yet_seen_counts_once_the_ring_is_refreshed() -> None:
    w = world(a40_node("node1"))
    rotated = KeyRing({**KEYS.keys, "k20270101t0000": b"r" * 32})
    w.add_pod(
        signed(
            manifest(
                "p",
                node="node1",
                phase="Running",
                annotations={
                    "hami.io/vgpu-node": "node1",
                    "hami.io/vgpu-devices-allocated": f"{A40_UUIDS[0]},NVIDIA,1000,0:;",
                },
            ),
            rotated,  # the leader already signs with the new key
        )
    )
    assert w.state.ledger.pods() == []  # this replica has not seen the new key yet
    w.key_store.ring = rotated
    w.runtime.refresh_keys_now()
    assert [a.pod for a in w.state.ledger.pods()] == ["default/p"]
