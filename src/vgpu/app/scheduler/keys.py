"""The scheduler's grant-signing key ring: loaded (or created) at start, refreshed periodically.

A rotation is a key with a greater name added to the store (the Secret); the next refresh
picks it up, and from then on the new key signs while every key in the ring still verifies.
"""

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from vgpu.app.key_ring import new_key_ring
from vgpu.domain.trust import KeyRing
from vgpu.ports.keys import GrantKeyPort

log = logging.getLogger(__name__)


class GrantKeys:
    """Holds the current ring; `ring()` is cheap and safe from any thread."""

    def __init__(
        self,
        store: GrantKeyPort,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._store = store
        self._wall_clock = wall_clock
        self._ring: KeyRing | None = None
        self._lock = threading.Lock()

    def ring(self) -> KeyRing | None:
        with self._lock:
            return self._ring

    def ensure(self) -> KeyRing:
        """Load the stored ring, creating one when none is stored; ClusterError if unreadable."""
        ring = self._store.load()
        if ring is None:
            ring = self._store.create(new_key_ring(self._wall_clock()))
            log.info("grant signing key ring created with key %s", ring.active)
        self._set(ring)
        return ring

    def refresh(self) -> bool:
        """Read the store again (a rotation adds a key); True when the keys changed.

        A failure (ClusterError) keeps the current ring."""
        ring = self._store.load()
        return ring is not None and self._set(ring)

    def _set(self, ring: KeyRing) -> bool:
        with self._lock:
            before = self._ring
            self._ring = ring
        changed = before is None or before.keys != ring.keys
        if changed:
            log.info("grant keys loaded: %s; %s signs", ", ".join(sorted(ring.keys)), ring.active)
        return changed
