"""Where the device plugin keeps what it served, so that a restart does not forget it."""

from collections.abc import Sequence
from typing import Protocol

from vgpu.domain.trust import ServedGrant


class RecordError(RuntimeError):
    """The served record cannot be read or written; the message names the file and why."""


class RecordCorrupt(RecordError):
    """The served record exists but its content is not a record (damaged or edited)."""


class ServedRecordPort(Protocol):
    @property
    def location(self) -> str:
        """Where the record is kept, for messages (a file path)."""
        ...

    def load(self) -> list[ServedGrant]:
        """The grants recorded; empty when there is no record yet. RecordCorrupt when the
        content does not read, RecordError when it cannot be read at all."""
        ...

    def save(self, node: str, grants: Sequence[ServedGrant]) -> None:
        """Replace the record with `grants`, durably and all at once (a crash leaves the old
        record or the new one); RecordError when it cannot be written."""
        ...

    def set_aside(self) -> str:
        """Move a corrupt record out of the way, kept for a person to read; where it went.
        RecordError when it cannot be moved."""
        ...
