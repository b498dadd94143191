import pytest

from vgpu.adapters.fake.keys import FakeGrantKeys
from vgpu.app.device_plugin.keyring import KeyRingCache, KeyRingUnavailable
from vgpu.domain.trust import GrantClaim, KeyRing
from vgpu.ports.cluster import ClusterError

OLD = KeyRing({"2026-01": b"a" * 32})
NEW = KeyRing({"2026-01": b"a" * 32, "2026-02": b"b" * 32})
CLAIM = GrantClaim("uid-1", "gpu-node-1", "1700000000", "GPU-a,NVIDIA,1000,0:;")


class CountingKeys(FakeGrantKeys):
    def __init__(self, ring: KeyRing | None) -> None:
        super().__init__(ring)
        self.loads = 0
        self.broken = False

    def load(self) -> KeyRing | None:
        self.loads += 1
        if self.broken:
            raise ClusterError("GET secrets/vgpu-grant-keys: HTTP 503")
        return super().load()


def cache(keys: CountingKeys, now: list[float]) -> KeyRingCache:
    return KeyRingCache(keys, "Secret vgpu-system/vgpu-grant-keys", 30, 5, lambda: now[0])


def test_the_ring_is_read_once_then_again_every_refresh_interval() -> None:
    keys, now = CountingKeys(OLD), [0.0]
    ring = cache(keys, now)
    signature = OLD.sign(CLAIM)

    assert ring.verify(signature, CLAIM) and ring.verify(signature, CLAIM)
    assert keys.loads == 1
    keys.ring = KeyRing({"2026-03": b"c" * 32})  # the old key is dropped
    now[0] = 29.0
    assert ring.verify(signature, CLAIM)
    now[0] = 30.0
    assert not ring.verify(signature, CLAIM)
    assert keys.loads == 2


def test_an_unknown_key_name_rereads_the_ring_at_most_every_retry_interval() -> None:
    keys, now = CountingKeys(OLD), [0.0]
    ring = cache(keys, now)
    assert not ring.verify(None, CLAIM)
    keys.ring = NEW
    signature = NEW.sign(CLAIM)

    now[0] = 1.0
    assert not ring.verify(signature, CLAIM)  # read 1 s ago: not again yet
    assert not ring.verify("made-up:abc", CLAIM)
    assert keys.loads == 1
    now[0] = 5.0
    assert ring.verify(signature, CLAIM)
    assert keys.loads == 2


def test_a_known_key_with_a_wrong_mac_never_rereads() -> None:
    keys, now = CountingKeys(OLD), [0.0]
    ring = cache(keys, now)
    now[0] = 10.0

    assert not ring.verify("2026-01:AAAA", CLAIM)
    assert keys.loads == 1


def test_a_failed_read_keeps_the_last_ring() -> None:
    keys, now = CountingKeys(OLD), [0.0]
    ring = cache(keys, now)
    assert ring.verify(OLD.sign(CLAIM), CLAIM)

    keys.broken = True
    now[0] = 60.0

    assert ring.verify(OLD.sign(CLAIM), CLAIM)
    assert keys.loads == 2


def test_no_ring_ever_read_is_an_error_that_says_why() -> None:
    keys, now = CountingKeys(None), [0.0]
    ring = cache(keys, now)

    with pytest.raises(KeyRingUnavailable, match="vgpu-system/vgpu-grant-keys holds no grant"):
        ring.verify(OLD.sign(CLAIM), CLAIM)

    keys.broken = True
    now[0] = 30.0
    with pytest.raises(KeyRingUnavailable, match="HTTP 503"):
        ring.verify(OLD.sign(CLAIM), CLAIM)
