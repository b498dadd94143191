"""The driver's memory of the claims it prepared, kept on the host across restarts.

An entry is saved (durably: see `vgpu.adapters.hostfile.atomic`) before the Prepare answer
leaves, and removed only by an Unprepare or once the claim is gone from the API. Reading the
record at start:

- no file: nothing was prepared yet, unless claims' own files are on the host (`missing`:
  the preparer then rebuilds the record from them);
- a file that does not read (damaged, edited): RecordCorrupt, on every use, until the
  preparer rebuilds the record from the claims' own files (`rebuild`; the file is then moved
  aside, `.corrupt-<time>`, kept for a person). Starting from an empty record instead would
  stop counting every claim prepared before;
- a file that cannot be read at all (permissions, I/O): HostFileError, on every use, until
  it reads, since saving a new record would overwrite what the old one holds.
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
from vgpu.ports.dra import HostFileError, PreparedStorePort

log = logging.getLogger(__name__)


class RecordCorrupt(HostFileError):
    """The record's file does not read; the message names the file and what is wrong."""


class PreparedClaims:
    """Thread-safe; `saves` counts the record's writes."""

    def __init__(self, store: PreparedStorePort, node: str, driver: str) -> None:
        self._store = store
        self._node = node
        self._driver = driver
        self._lock = threading.Lock()
        self._claims: dict[str, PreparedClaim] | None = None
        self.missing = False  # the record had no file when it was read
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

    def rebuild(self, claims: list[PreparedClaim]) -> None:
        """Make `claims` (read back from the claims' own files) the record, moving a file
        that does not read aside first; HostFileError when that cannot be done."""
        with self._lock:
            if not self.missing:
                log.error("prepared-claims record %s moved to %s", self._store.location,
                          self._store.set_aside())
            self._store.save(encode_prepared_record(self._node, self._driver, claims))
            self.saves += 1
            self._claims = {claim.uid: claim for claim in claims}
            self.missing = False

    def _loaded(self) -> dict[str, PreparedClaim]:
        if self._claims is None:
            self._claims = self._read()
        return self._claims

    def _read(self) -> dict[str, PreparedClaim]:
        text = self._store.load()
        if text is None:
            self.missing = True
            return {}
        try:
            node, driver, claims = decode_prepared_record(text)
        except PreparedRecordError as exc:
            raise RecordCorrupt(
                f"prepared-claims record {self._store.location} does not read ({exc})"
            ) from None
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
