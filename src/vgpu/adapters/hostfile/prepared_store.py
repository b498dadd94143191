"""The DRA driver's record of prepared claims as a file on the host (`<state dir>/
dra-prepared.json`), replaced atomically and durably on every change
(`vgpu.adapters.hostfile.atomic`); its content is `vgpu.domain.dra.prepared_record`'s."""

from pathlib import Path

from vgpu.adapters.hostfile.atomic import replace_file, set_aside, why
from vgpu.ports.dra import HostFileError

FILE_NAME = "dra-prepared.json"


class PreparedStore:
    """Implements PreparedStorePort with `<state_dir>/<name>`."""

    def __init__(self, state_dir: Path, name: str = FILE_NAME) -> None:
        self._path = state_dir / name

    @property
    def location(self) -> str:
        return str(self._path)

    def load(self) -> str | None:
        try:
            # bytes that are not UTF-8 are damage the record's decoder reports, like any other
            return self._path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise HostFileError(f"cannot read {self._path}: {why(exc)}") from None

    def save(self, text: str) -> None:
        try:
            replace_file(self._path, text.encode())
        except OSError as exc:
            raise HostFileError(f"cannot write {self._path}: {why(exc)}") from None

    def set_aside(self) -> str:
        try:
            return str(set_aside(self._path))
        except OSError as exc:
            raise HostFileError(f"cannot move {self._path} aside: {why(exc)}") from None
