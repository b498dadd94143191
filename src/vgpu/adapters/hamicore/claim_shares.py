"""The claim share directories `vgpu dra-driver` prepares, `<claims dir>/<claim uid>/<share>/`,
and whose they are: `claim.json` beside the shares (the driver writes it atomically, and it is
never mounted into a container, so no tenant can rewrite it) names the claim, and for each
share directory the request it serves.

A claim directory without `claim.json` is being prepared (the file comes last) and is skipped
quietly; one whose `claim.json` does not read is skipped with a warning, once per problem.
"""

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vgpu.ports.accounting import CacheDir, ClaimShare

log = logging.getLogger(__name__)

CLAIM_FILE = "claim.json"


class ClaimShareDirs:
    """Lists the share directories under `root` (`<hook>/vgpu/claims`); a missing root is a
    node without DRA claims, not a problem."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._reported: set[str] = set()

    def share_dirs(self) -> list[CacheDir]:
        try:
            claims = sorted(os.scandir(self._root), key=lambda e: e.name)
        except FileNotFoundError:
            return []
        except OSError as err:
            self._once(f"cannot list {self._root}: {err.strerror or err}")
            return []
        found = []
        for claim in claims:
            if claim.is_dir(follow_symlinks=False):
                found += self._shares(Path(claim.path))
        return found

    def _shares(self, directory: Path) -> list[CacheDir]:
        try:
            info = json.loads((directory / CLAIM_FILE).read_bytes())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as err:
            self._once(f"skipping claim directory {directory}: {CLAIM_FILE} does not read: {err}")
            return []
        shares = _shares(info, directory.name)
        if shares is None:
            self._once(f"skipping claim directory {directory}: {CLAIM_FILE} is not the driver's")
            return []
        found = []
        for share in shares:
            path = directory / share.share
            try:
                modified = path.stat().st_mtime
            except OSError:
                continue  # not made yet, or gone with the claim
            if path.is_dir() and not path.is_symlink():
                found.append(CacheDir("", "", path, modified, share))
        return found

    def _once(self, problem: str) -> None:
        if problem not in self._reported:
            self._reported.add(problem)
            log.warning("%s", problem)


def _shares(info: Any, uid: str) -> list[ClaimShare] | None:
    """The shares `claim.json` lists; None when it is not what the driver writes or names
    another claim than its directory."""
    claim = info.get("claim") if isinstance(info, Mapping) else None
    shares = info.get("shares") if isinstance(info, Mapping) else None
    if not isinstance(claim, Mapping) or not isinstance(shares, list) or claim.get("uid") != uid:
        return None
    namespace, name = claim.get("namespace"), claim.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str):
        return None
    found = []
    for share in shares:
        directory = share.get("directory") if isinstance(share, Mapping) else None
        request = share.get("request") if isinstance(share, Mapping) else None
        if not isinstance(directory, str) or not isinstance(request, str):
            return None
        if directory in ("", ".", "..") or "/" in directory:
            return None
        found.append(ClaimShare(uid, namespace, name, request, directory))
    return found
