"""An in-memory grant key store: what a Secret would hold, for tests and fake-cluster mode."""

import threading

from vgpu.domain.trust import KeyRing


class FakeGrantKeys:
    """Implements GrantKeyPort in memory; `ring` may be replaced to model a rotation."""

    def __init__(self, ring: KeyRing | None = None) -> None:
        self._lock = threading.Lock()
        self.ring = ring

    def load(self) -> KeyRing | None:
        with self._lock:
            return self.ring

    def create(self, ring: KeyRing) -> KeyRing:
        with self._lock:
            if self.ring is None:
                self.ring = ring
            return self.ring
