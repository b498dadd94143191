"""CDI spec files: ours, one transient file per prepared claim in the runtime's dynamic CDI
directory (`/var/run/cdi`), and the static ones other software installed (`/etc/cdi`), read to
find the device names NVIDIA's spec defines.

Our file for a claim is `<vendor>-<class>_<claim uid>.json` (`vgpu.io-claim_<uid>.json`), the
naming the CDI tools use for generated specs, written atomically so a runtime reading the
directory never sees half a spec.
"""

import json
import logging
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from vgpu.adapters.hostfile.atomic import replace_file, sync_directory, why
from vgpu.domain.dra import CDI_KIND
from vgpu.ports.dra import HostFileError, JsonObject

log = logging.getLogger(__name__)

STATIC_DIRS = ("/etc/cdi", "/var/run/cdi")
_UID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_SPEC_FILE_MODE = 0o644
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where PyYAML has it


class CdiSpecFiles:
    """Implements CdiSpecPort in `directory` for specs of `kind`."""

    def __init__(self, directory: str | Path, kind: str = CDI_KIND) -> None:
        self._dir = Path(directory)
        self._prefix = kind.replace("/", "-") + "_"

    @property
    def directory(self) -> str:
        return str(self._dir)

    def path(self, claim_uid: str) -> Path:
        if not _UID.match(claim_uid):
            raise HostFileError(f"claim uid {claim_uid!r:.80} cannot name a CDI spec file")
        return self._dir / f"{self._prefix}{claim_uid}.json"

    def write(self, claim_uid: str, spec: JsonObject) -> str:
        path = self.path(claim_uid)
        data = json.dumps(spec, indent=1, sort_keys=False).encode()
        try:
            replace_file(path, data, _SPEC_FILE_MODE)
        except OSError as exc:
            raise HostFileError(f"cannot write CDI spec {path}: {why(exc)}") from None
        return str(path)

    def read(self, claim_uid: str) -> dict[str, Any] | None:
        try:
            parsed = json.loads(self.path(claim_uid).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return parsed if isinstance(parsed, dict) else None

    def remove(self, claim_uid: str) -> None:
        path = self.path(claim_uid)
        try:
            path.unlink()
        except (FileNotFoundError, NotADirectoryError):
            return  # nothing there: no spec, or no directory at all
        except OSError as exc:
            raise HostFileError(f"cannot remove CDI spec {path}: {why(exc)}") from None
        try:
            sync_directory(self._dir)
        except OSError as exc:
            raise HostFileError(f"cannot remove CDI spec {path}: {why(exc)}") from None

    def claim_uids(self) -> list[str]:
        try:
            names = sorted(p.name for p in self._dir.iterdir())
        except OSError:
            return []
        found = []
        for name in names:
            if name.startswith(self._prefix) and name.endswith(".json"):
                found.append(name[len(self._prefix) : -len(".json")])
        return found


class StaticCdiCatalog:
    """Implements CdiCatalogPort over the spec files (JSON or YAML) in `directories`; a file
    that does not read is skipped (and logged once at debug level: other vendors' files are
    none of our business). Every Prepare asks, and NVIDIA's spec is tens of KB of YAML: a file
    is parsed again only when it changed (its inode, size or times)."""

    def __init__(self, directories: Iterable[str | Path] = STATIC_DIRS) -> None:
        self._dirs = [Path(d) for d in directories]
        self._lock = threading.Lock()
        self._read: dict[Path, tuple[tuple[int, ...], str | None, frozenset[str]]] = {}

    def device_names(self, kind: str) -> set[str]:
        names: set[str] = set()
        seen = {}
        with self._lock:
            for file, stamp in self._files():
                known = self._read.get(file)
                if known is None or known[0] != stamp:
                    known = (stamp, *_spec_devices(file))
                seen[file] = known
                if known[1] == kind:
                    names |= known[2]
            self._read = seen  # forget files that are gone
        return names

    def _files(self) -> Iterable[tuple[Path, tuple[int, ...]]]:
        for directory in self._dirs:
            try:
                files = sorted(directory.iterdir())
            except OSError:
                continue
            for file in files:
                if file.suffix not in (".json", ".yaml", ".yml"):
                    continue
                try:
                    stat = file.stat()
                except OSError:
                    continue
                yield file, (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _spec_devices(file: Path) -> tuple[str | None, frozenset[str]]:
    """A spec file's kind and device names; (None, nothing) when it does not read."""
    try:
        spec = yaml.load(file.read_text(encoding="utf-8"), Loader=_LOADER)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        log.debug("skipping CDI spec %s: %s", file, exc)
        return None, frozenset()
    if not isinstance(spec, dict) or not isinstance(spec.get("kind"), str):
        return None, frozenset()
    devices = spec.get("devices")
    names = frozenset(
        device["name"]
        for device in (devices if isinstance(devices, list) else [])
        if isinstance(device, dict) and isinstance(device.get("name"), str)
    )
    return spec["kind"], names
