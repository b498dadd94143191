"""HAMi-core's cache files on the host, memory-mapped: implements AccountingPort.

Directory rules follow HAMi's monitor: a directory is `<pod uid>_<container>` split on the
first `_`; the claim share directories of `vgpu dra-driver` are listed too, given their root
(`claim_shares.py`); in each, the files whose name contains `libvgpu.so` or ends in `.cache`
are counted (more than two is an error), and the first `*.cache` file (by name) is the
region.

Each region file stays mapped between reads while it is the same file (same inode); the
device plugin wipes the directory at every Allocate, so a new file is mapped afresh. Maps are
read-only unless the adapter is `writable` (priority feedback on); a file this process may
not write is then still mapped read-only, so its figures are read. A file that shrank below
its mapped size is dropped before it is touched: reading a mapped page past the end of a file
would kill the process (SIGBUS).
"""

import logging
import mmap
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vgpu.adapters.hamicore.claim_shares import ClaimShareDirs
from vgpu.adapters.hamicore.layout import Layout, decode, layout_of
from vgpu.ports.accounting import (
    CacheDir,
    Region,
    RegionNotReady,
    RegionUnavailable,
    RegionUnreadable,
)

log = logging.getLogger(__name__)

_INT32 = 4


@dataclass(slots=True)
class _Mapped:
    file: Path
    inode: int
    size: int
    map: mmap.mmap
    writable: bool


class HamiCoreRegions:
    """The cache directories under `root` (HAMi: `/usr/local/vgpu/containers`).

    Thread-safe: the metrics scrape and the feedback loop may read at the same time.
    """

    def __init__(
        self, root: Path, *, writable: bool = False, claims_root: Path | None = None
    ) -> None:
        self._root = root
        self._claims = ClaimShareDirs(claims_root) if claims_root is not None else None
        self._writable = writable
        self._lock = threading.Lock()
        self._maps: dict[Path, _Mapped] = {}
        self._badly_named: set[str] = set()
        self._root_problem = ""

    def list_dirs(self) -> list[CacheDir]:
        found = self._containers()
        if self._claims is not None:
            found += self._claims.share_dirs()
        listed = {entry.path for entry in found}
        with self._lock:
            for gone in [d for d in self._maps if d not in listed]:
                self._forget(gone)  # removed by someone else: let its pages go
        return found

    def _containers(self) -> list[CacheDir]:
        try:
            children = sorted(os.scandir(self._root), key=lambda e: e.name)
        except OSError as err:
            problem = f"cannot list {self._root}: {err.strerror or err}"
            if self._root_problem != problem:  # once, not every tick
                log.warning("%s", problem)
            self._root_problem = problem
            return []
        self._root_problem = ""
        found = []
        for child in children:
            try:
                if not child.is_dir(follow_symlinks=False):
                    continue
                modified = child.stat(follow_symlinks=False).st_mtime
            except OSError:
                continue  # removed while listing
            pod_uid, _, container = child.name.partition("_")
            if not pod_uid or not container:
                if child.name not in self._badly_named:
                    self._badly_named.add(child.name)
                    log.warning("skipping %s: not named <pod uid>_<container>", Path(child.path))
                continue
            found.append(CacheDir(pod_uid, container, Path(child.path), modified))
        return found

    def read(self, entry: CacheDir) -> Region:
        with self._lock:
            mapped = self._mapped(entry.path)
            return decode(mapped.map, mapped.size)

    def set_recent_kernel(self, entry: CacheDir, value: int) -> None:
        self._store(entry, value, lambda layout: layout.recent_kernel)

    def set_utilization_switch(self, entry: CacheDir, value: int) -> None:
        self._store(entry, value, lambda layout: layout.utilization_switch)

    def remove(self, entry: CacheDir) -> None:
        if entry.claim is not None:
            raise ValueError(f"{entry.path} is a claim share: the DRA driver removes it")
        with self._lock:
            self._forget(entry.path)
        shutil.rmtree(entry.path, ignore_errors=True)

    def close(self) -> None:
        with self._lock:
            for path in list(self._maps):
                self._forget(path)

    # internals --------------------------------------------------------------------------------
    def _store(self, entry: CacheDir, value: int, offset_of: Callable[[Layout], int]) -> None:
        with self._lock:
            mapped = self._mapped(entry.path)
            if not mapped.writable:
                raise RegionUnreadable(f"{mapped.file} is mapped read-only")
            offset = offset_of(layout_of(mapped.map, mapped.size))
            # One aligned 4-byte store, as HAMi-core's own atomic int accesses expect.
            with memoryview(mapped.map) as view, view[offset : offset + _INT32] as field:
                field.cast("i")[0] = value

    def _mapped(self, directory: Path) -> _Mapped:
        try:
            file = _region_file(directory)
        except RegionUnavailable:
            self._forget(directory)
            raise
        try:
            info = os.stat(file)
        except FileNotFoundError:
            self._forget(directory)
            raise RegionUnreadable(f"{file} vanished while being read") from None
        except OSError as err:
            raise RegionUnreadable(f"cannot read {file}: {err.strerror or err}") from None
        known = self._maps.get(directory)
        if known is not None and known.file == file and known.inode == info.st_ino:
            if info.st_size >= known.size:
                return known
            self._forget(directory)
            raise RegionUnreadable(
                f"{file} shrank from {known.size} to {info.st_size} bytes (truncated)"
            )
        self._forget(directory)
        mapped = self._map(file)
        self._maps[directory] = mapped
        return mapped

    def _map(self, file: Path) -> _Mapped:
        fd, writable = self._open(file)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                raise RegionUnreadable(f"{file} is empty (truncated)")
            access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
            region = mmap.mmap(fd, size, access=access)
            inode = os.fstat(fd).st_ino
        except OSError as err:
            raise RegionUnreadable(f"cannot map {file}: {err.strerror or err}") from None
        finally:
            os.close(fd)
        try:
            layout_of(region, size)
        except RegionUnreadable as err:
            region.close()
            raise RegionUnreadable(f"{file}: {err}") from None
        return _Mapped(file, inode, size, region, writable)

    def _open(self, file: Path) -> tuple[int, bool]:
        """A descriptor of `file`, and whether it is open for writing."""
        try:
            if self._writable:
                try:
                    return os.open(file, os.O_RDWR), True
                except PermissionError:
                    log.warning("%s is not writable here: no priority feedback for it", file)
            return os.open(file, os.O_RDONLY), False
        except FileNotFoundError:
            raise RegionUnreadable(f"{file} vanished while being read") from None
        except OSError as err:
            raise RegionUnreadable(f"cannot open {file}: {err.strerror or err}") from None

    def _forget(self, directory: Path) -> None:
        mapped = self._maps.pop(directory, None)
        if mapped is not None:
            mapped.map.close()


def _region_file(directory: Path) -> Path:
    """The directory's cache file; RegionNotReady when there is none yet."""
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        raise RegionUnreadable(f"{directory} vanished while being read") from None
    except OSError as err:
        raise RegionUnreadable(f"cannot list {directory}: {err.strerror or err}") from None
    counted = [n for n in names if "libvgpu.so" in n or n.endswith(".cache")]
    if len(counted) > 2:
        raise RegionUnreadable(
            f"{directory} holds {len(counted)} cache/library files, expected at most 2: "
            + ", ".join(counted)
        )
    caches = [n for n in counted if n.endswith(".cache") and "libvgpu.so" not in n]
    if not caches:
        raise RegionNotReady(f"{directory} has no .cache file yet")
    return directory / caches[0]
