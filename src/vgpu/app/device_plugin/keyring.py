"""The grant key ring as the plugin sees it: read from its store, re-read as it may rotate.

The ring is re-read when the copy in hand is older than `refresh_s`, and once more (at most
every `unknown_key_retry_s`) when a signature names a key the copy lacks: the scheduler may
have just rotated to a new key. A failed read keeps the last good copy.
"""

import logging
import math
import threading
import time
from collections.abc import Callable

from vgpu.domain.trust import GrantClaim, KeyRing, SigningError
from vgpu.ports.cluster import ClusterError
from vgpu.ports.keys import GrantKeyPort

log = logging.getLogger(__name__)


class KeyRingUnavailable(RuntimeError):
    """No key ring has been read yet, so no grant can be verified (nor refused as forged)."""


class KeyRingCache:
    """Thread-safe; `verify` may read the store, everything else is in memory."""

    def __init__(
        self,
        keys: GrantKeyPort,
        where: str,
        refresh_s: float = 30.0,
        unknown_key_retry_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._keys = keys
        self._where = where
        self._refresh_s = refresh_s
        self._unknown_key_retry_s = unknown_key_retry_s
        self._clock = clock
        self._lock = threading.Lock()
        self._ring: KeyRing | None = None
        self._read_at = -math.inf
        self._failure = ""

    def verify(self, signature: str | None, claim: GrantClaim) -> bool:
        """Whether `signature` is a signature of `claim` by a key of the current ring.

        Raises KeyRingUnavailable when no ring could ever be read.
        """
        with self._lock:
            now = self._clock()
            if now - self._read_at >= self._refresh_s:
                self._read(now)
            ring = self._current()
            if ring.verify(signature, claim):
                return True
            named = (signature or "").partition(":")[0]
            retry_due = now - self._read_at >= self._unknown_key_retry_s
            if named and named not in ring.keys and retry_due:
                log.info("a grant names unknown key %r: reading %s again", named, self._where)
                self._read(now)
                return self._current().verify(signature, claim)
            return False

    def _read(self, now: float) -> None:
        self._read_at = now
        try:
            ring = self._keys.load()
        except (ClusterError, SigningError) as exc:
            self._failure = f"cannot read the grant key ring from {self._where}: {exc}"
            log.error("%s%s", self._failure, "; keeping the last one" if self._ring else "")
            return
        if ring is None or not ring.keys:
            self._failure = f"{self._where} holds no grant keys (has the scheduler created it?)"
            log.error("%s", self._failure)
            return
        if self._ring is None or set(ring.keys) != set(self._ring.keys):
            log.info("grant key ring from %s: keys %s", self._where, ", ".join(sorted(ring.keys)))
        self._ring = ring

    def _current(self) -> KeyRing:
        if self._ring is None:
            raise KeyRingUnavailable(self._failure or f"no grant key ring read from {self._where}")
        return self._ring
