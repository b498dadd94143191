"""The served record as a JSON file on the host, replaced atomically on every change
(`vgpu.adapters.hostfile.atomic`): after a crash or a power cut the file holds the old record or
the new one, never a mix, and never nothing once something was saved.
"""

from collections.abc import Sequence
from pathlib import Path

from vgpu.adapters.hostfile.atomic import replace_file, set_aside, why
from vgpu.domain.trust import (
    ServedGrant,
    ServedRecordError,
    decode_served_record,
    encode_served_record,
)
from vgpu.ports.served import RecordCorrupt, RecordError

FILE_NAME = "served.json"


class JsonServedRecord:
    """Implements ServedRecordPort with `<state_dir>/served.json`; the directory is made on
    the first save when missing."""

    def __init__(self, state_dir: Path, name: str = FILE_NAME) -> None:
        self._path = state_dir / name

    @property
    def location(self) -> str:
        return str(self._path)

    def load(self) -> list[ServedGrant]:
        try:
            text = self._path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except UnicodeDecodeError as exc:
            raise RecordCorrupt(f"served record {self._path} is not UTF-8 text: {exc}") from None
        except OSError as exc:
            raise RecordError(f"cannot read served record {self._path}: {why(exc)}") from None
        try:
            return decode_served_record(text)[1]
        except ServedRecordError as exc:
            raise RecordCorrupt(f"served record {self._path} does not read: {exc}") from None

    def save(self, node: str, grants: Sequence[ServedGrant]) -> None:
        data = encode_served_record(node, grants).encode()
        try:
            replace_file(self._path, data)
        except OSError as exc:
            raise RecordError(f"cannot write served record {self._path}: {why(exc)}") from None

    def set_aside(self) -> str:
        try:
            return str(set_aside(self._path))
        except OSError as exc:
            raise RecordError(
                f"cannot move corrupt served record {self._path} aside: {why(exc)}"
            ) from None

