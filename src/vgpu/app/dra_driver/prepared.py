"""The driver's memory of the claims it prepared, kept on the host across restarts.

An entry is saved (durably: see `vgpu.adapters.hostfile.atomic`) before the Prepare answer
leaves, and removed only by an Unprepare or once the claim is gone from the API. Reading the
record at start:

- no file: nothing was prepared yet;
- a file that does not read (damaged, edited): it is moved aside (`.corrupt-<time>`, kept for a
  person), an error is logged, and the driver starts from an empty record;
- a file that cannot be read at all (permissions, I/O): nothing is prepared (HostFileError)
  until it reads, since saving a new record would overwrite what the old one holds.
"""

import logging
import threading
from collections.abc import Callable

from vgpu.domain.dra import (
    PreparedClaim,
    PreparedRecordError,
    decode_prepared_record,
    encode_prepared_record,
)
from vgpu.ports.dra import PreparedStorePort

log = logging.getLogger(__name__)


class PreparedClaims:
    """Thread-safe; `saves` counts the record's writes."""

    def __init__(self, store: PreparedStorePort, node: str, driver: str) -> None:
        self._store = store
        self._node = node
        self._driver = driver
        self._lock = threading.Lock()
        self._claims: dict[str, PreparedClaim] | None = None
        self.saves = 0

    @property
    def location(self) -> str:
        return self._store.location

    def entries(self) -> dict[str, PreparedClaim]:
        """By claim uid; HostFileError while the record cannot be read."""
        with self._lock:
            return dict(self._loaded())

    def get(self, uid: str) -> PreparedClaim | None:
        with self._lock:
            return self._loaded().get(uid)

    def add(self, claim: PreparedClaim) -> None:
        """Record `claim` (replacing an entry of the same uid) and save before returning;
        HostFileError when it cannot be saved (then nothing changed)."""
        self._change(lambda claims: {**claims, claim.uid: claim})

    def remove(self, uid: str) -> PreparedClaim | None:
        """Forget the claim and save; what was recorded (None: nothing, and nothing saved)."""
        with self._lock:
            gone = self._loaded().get(uid)
        if gone is not None:
            self._change(lambda claims: {k: v for k, v in claims.items() if k != uid})
        return gone

    def _change(self, edit: Callable[[dict[str, PreparedClaim]], dict[str, PreparedClaim]]) -> None:
        with self._lock:
            updated = edit(self._loaded())
            text = encode_prepared_record(self._node, self._driver, list(updated.values()))
            self._store.save(text)
            self.saves += 1
            self._claims = updated

    def _loaded(self) -> dict[str, PreparedClaim]:
        if self._claims is None:
            self._claims = self._read()
        return self._claims

    def _read(self) -> dict[str, PreparedClaim]:
        text = self._store.load()
        if text is None:
            return {}
        try:
            node, driver, claims = decode_prepared_record(text)
        except PreparedRecordError as exc:
            aside = self._store.set_aside()
            log.error(
                "prepared-claims record %s does not read (%s); moved it to %s and starting "
                "from an empty record: claims prepared before are no longer counted on this "
                "node's GPUs until they are prepared again",
                self._store.location,
                exc,
                aside,
            )
            return {}
        if (node, driver) != (self._node, self._driver):
            log.warning(
                "prepared-claims record %s was written for driver %s on node %s; this is %s on "
                "%s: its claims are counted all the same",
                self._store.location,
                driver,
                node,
                self._driver,
                self._node,
            )
        log.info(
            "prepared-claims record %s: %d claim(s) prepared before this start",
            self._store.location,
            len(claims),
        )
        return {claim.uid: claim for claim in claims}
