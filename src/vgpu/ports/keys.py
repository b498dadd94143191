"""Where the grant-signing key ring is kept (a Kubernetes Secret in production)."""

from typing import Protocol

from vgpu.domain.trust import KeyRing


class GrantKeyPort(Protocol):
    def load(self) -> KeyRing | None:
        """The stored key ring, or None when none is stored yet; ClusterError if unreadable."""
        ...

    def create(self, ring: KeyRing) -> KeyRing:
        """Store `ring` unless one is stored already; returns the ring that is stored now
        (another replica may have created it first)."""
        ...
