"""Per-claim directories on the host: `<hook>/vgpu/claims/<claim uid>/<share>/`, one per
prepared device share, mounted read-write into the claim's containers at the same path so
HAMi-core keeps its shared cache there; and `<hook>/vgpu/claims/<claim uid>/claim.json`, beside
them and never mounted (a tenant could rewrite a file inside a mounted directory), saying whose
they are for `vgpu monitor` and holding what the driver's record holds of the claim, so a lost
record can be rebuilt (an admin-access claim has this file and no share directory).
HAMi-core's lock directory, which limited shares' specs mount, is made too.
"""

import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from vgpu.adapters.hostfile.atomic import replace_file, why
from vgpu.ports.dra import HostFileError, JsonObject

CLAIM_FILE = "claim.json"
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class ClaimDirs:
    """Implements ClaimDirsPort under `<hook_path>/vgpu/claims`."""

    def __init__(self, hook_path: str | Path, lock_dir: str | Path = "/tmp/vgpulock") -> None:
        self._root = Path(hook_path) / "vgpu" / "claims"
        self._lock_dir = Path(lock_dir)

    def path(self, claim_uid: str, share: str) -> str:
        return str(self._claim(claim_uid) / _name("share", share))

    def prepare(self, claim_uid: str, shares: Sequence[str], info: JsonObject) -> None:
        claim = self._claim(claim_uid)
        targets = [claim / _name("share", share) for share in shares]
        try:
            claim.mkdir(parents=True, exist_ok=True)
            for target in targets:
                # HAMi-core, as whatever user the container runs, creates its files in both
                target.mkdir(exist_ok=True)
                os.chmod(target, 0o777)
            if targets and not self._lock_dir.is_dir():
                self._lock_dir.mkdir(parents=True, exist_ok=True)
                os.chmod(self._lock_dir, 0o777)
            # rebuilt from the driver's record at start, so no fsync: atomic is enough
            info_text = json.dumps(info, indent=1).encode()
            replace_file(claim / CLAIM_FILE, info_text, 0o644, durable=False)
        except OSError as exc:
            raise HostFileError(
                f"cannot prepare claim directory {exc.filename or claim}: {why(exc)} (is "
                f"{self._root.parent} mounted read-write into the driver?)"
            ) from None

    def read_info(self, claim_uid: str) -> str | None:
        path = self._claim(claim_uid) / CLAIM_FILE
        try:
            # bytes that are not UTF-8 are damage the decoder reports, like any other
            return path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise HostFileError(f"cannot read {path}: {why(exc)}") from None

    def remove(self, claim_uid: str) -> None:
        claim = self._claim(claim_uid)
        try:
            shutil.rmtree(claim)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise HostFileError(f"cannot remove claim directory {claim}: {why(exc)}") from None

    def claim_uids(self) -> list[str]:
        try:
            return sorted(p.name for p in self._root.iterdir() if p.is_dir())
        except OSError:
            return []

    def _claim(self, claim_uid: str) -> Path:
        return self._root / _name("claim uid", claim_uid)


def _name(what: str, value: str) -> str:
    if not _SAFE.match(value) or value in (".", ".."):
        raise HostFileError(f"{what} {value!r:.80} cannot name a host directory")
    return value
