"""Container accounting held in memory (AccountingPort), for tests of the monitor's logic.

    fake = FakeAccounting()
    entry = fake.add("pod-uid", "main", region)            # a readable region
    fake.add("other-uid", "main", RegionUnreadable("wrong magic"))   # one that fails
    ...
    fake.writes  # [(entry, "recent_kernel", 1), ...] in the order they were made

Stored fields follow the writes, so a later `read` sees them as HAMi-core would.
"""

import dataclasses
import threading
from pathlib import Path

from vgpu.ports.accounting import (
    CacheDir,
    ClaimShare,
    Region,
    RegionNotReady,
    RegionUnavailable,
)


class FakeAccounting:
    def __init__(self, root: Path = Path("/fake/containers")) -> None:
        self._root = root
        self._lock = threading.Lock()
        self._dirs: dict[Path, CacheDir] = {}
        self._regions: dict[Path, Region | RegionUnavailable] = {}
        self.writes: list[tuple[CacheDir, str, int]] = []
        self.removed: list[CacheDir] = []

    def add(
        self,
        pod_uid: str,
        container: str,
        region: Region | RegionUnavailable | None = None,
        modified: float = 0.0,
    ) -> CacheDir:
        """A directory whose region is `region`, fails with it, or is not ready (None)."""
        entry = CacheDir(pod_uid, container, self._root / f"{pod_uid}_{container}", modified)
        with self._lock:
            self._dirs[entry.path] = entry
            self._regions[entry.path] = region or RegionNotReady(f"{entry.path}: no file yet")
        return entry

    def add_share(
        self, share: ClaimShare, region: Region | RegionUnavailable | None = None
    ) -> CacheDir:
        """A claim share's directory (the DRA driver's), as `add` makes a container's."""
        path = self._root.parent / "claims" / share.claim_uid / share.share
        entry = CacheDir("", "", path, 0.0, share)
        with self._lock:
            self._dirs[entry.path] = entry
            self._regions[entry.path] = region or RegionNotReady(f"{entry.path}: no file yet")
        return entry

    # AccountingPort ---------------------------------------------------------------------------
    def list_dirs(self) -> list[CacheDir]:
        with self._lock:
            return sorted(self._dirs.values(), key=lambda e: e.path)

    def read(self, entry: CacheDir) -> Region:
        with self._lock:
            found = self._regions.get(entry.path)
        if found is None:
            raise RegionNotReady(f"{entry.path} vanished")
        if isinstance(found, RegionUnavailable):
            raise found
        return found

    def set_recent_kernel(self, entry: CacheDir, value: int) -> None:
        region = dataclasses.replace(self.read(entry), recent_kernel=value)
        self._write(entry, region, "recent_kernel", value)

    def set_utilization_switch(self, entry: CacheDir, value: int) -> None:
        region = dataclasses.replace(self.read(entry), utilization_switch=value)
        self._write(entry, region, "utilization_switch", value)

    def remove(self, entry: CacheDir) -> None:
        if entry.claim is not None:
            raise ValueError(f"{entry.path} is a claim share: the DRA driver removes it")
        with self._lock:
            self._dirs.pop(entry.path, None)
            self._regions.pop(entry.path, None)
            self.removed.append(entry)

    def close(self) -> None:
        pass

    def _write(self, entry: CacheDir, region: Region, field: str, value: int) -> None:
        with self._lock:
            self._regions[entry.path] = region
            self.writes.append((entry, field, value))
