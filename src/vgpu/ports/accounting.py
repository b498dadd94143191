"""What each GPU container really uses, as HAMi-core accounts it in its shared region.

HAMi-core (libvgpu.so, preloaded in every GPU container) keeps one region per container in a
memory-mapped cache file on the host, under `<containers dir>/<pod uid>_<container>/`; in a
container that `vgpu dra-driver` prepared, one per claim share, under
`<claims dir>/<claim uid>/<share>/`, whose owner the driver's `claim.json` beside the shares
names. An AccountingPort finds those directories, decodes their regions, writes back the two
fields the monitor's priority feedback owns, and removes the directories of containers that
are gone (never a claim's: the driver removes those when the claim is unprepared).
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

DEVICE_SLOTS = 16
"""HAMi-core's CUDA_DEVICE_MAX_COUNT: per-device arrays in the region have this many entries."""


class RegionUnavailable(Exception):
    """A directory's region cannot be read now; the message says why (for the log)."""


class RegionNotReady(RegionUnavailable):
    """No cache file yet (no CUDA process has started in the container): try again later."""


class RegionUnreadable(RegionUnavailable):
    """The cache file is there but cannot be used: truncated, wrong magic, unknown version,
    more cache files than one, or it vanished while being read."""


@dataclass(frozen=True, slots=True)
class ClaimShare:
    """Whose a claim share directory is, as the driver's `claim.json` says: the ResourceClaim
    and the claim's request the share was allocated for (`gpu`, or `gpu/<subrequest>`)."""

    claim_uid: str
    namespace: str
    name: str
    request: str
    share: str


@dataclass(frozen=True, slots=True)
class CacheDir:
    """One `<pod uid>_<container>` directory, or a claim share's (`claim` set; `pod_uid` and
    `container` are then empty); `modified` is its mtime in Unix seconds."""

    pod_uid: str
    container: str
    path: Path
    modified: float
    claim: ClaimShare | None = None


@dataclass(frozen=True, slots=True)
class DeviceMemory:
    """One process's memory on one device, bytes; `total` = context + module + data."""

    context: int
    module: int
    data: int
    offset: int
    total: int


@dataclass(frozen=True, slots=True)
class DeviceUtilization:
    """One process's utilisation of one device, percent."""

    decoder: int
    encoder: int
    sm: int


@dataclass(frozen=True, slots=True)
class ProcessSlot:
    """A process HAMi-core tracks; per-device tuples have DEVICE_SLOTS entries.

    `status`: 1 running, 2 swapped out, 0 exited (the monitor counts only `status != 0`).
    """

    pid: int
    host_pid: int
    memory: tuple[DeviceMemory, ...]
    monitor_used: tuple[int, ...]
    utilization: tuple[DeviceUtilization, ...]
    status: int

    @property
    def live(self) -> bool:
        return self.status != 0


@dataclass(frozen=True, slots=True)
class Region:
    """A decoded shared region.

    `layout` is 0 (HAMi-core before version fields; `major`/`minor` are then 0) or 1.
    `device_count` is clamped to 0..DEVICE_SLOTS and `uuids` has that many entries ("" where
    the slot is empty or not UTF-8); `limits` (bytes) and `sm_limits` (percent) have
    DEVICE_SLOTS entries; `processes` are the first `proc_num` slots (clamped to 0..1024).
    `last_kernel_time` is Unix seconds, 0 when unknown (always 0 in layout 0).
    """

    layout: int
    major: int
    minor: int
    device_count: int
    uuids: tuple[str, ...]
    limits: tuple[int, ...]
    sm_limits: tuple[int, ...]
    processes: tuple[ProcessSlot, ...]
    utilization_switch: int
    recent_kernel: int
    priority: int
    last_kernel_time: int


class AccountingPort(Protocol):
    def list_dirs(self) -> list[CacheDir]:
        """Every well-named container directory now (badly named ones are logged and left)."""
        ...

    def read(self, entry: CacheDir) -> Region:
        """The directory's region now; raises RegionNotReady or RegionUnreadable."""
        ...

    def set_recent_kernel(self, entry: CacheDir, value: int) -> None:
        """Store HAMi-core's `recent_kernel`; raises RegionUnavailable if it cannot."""
        ...

    def set_utilization_switch(self, entry: CacheDir, value: int) -> None:
        """Store HAMi-core's `utilization_switch`; raises RegionUnavailable if it cannot."""
        ...

    def remove(self, entry: CacheDir) -> None:
        """Forget the directory and delete it with its contents (gone already is fine); a
        claim share's is never deleted (ValueError): the DRA driver owns it."""
        ...

    def close(self) -> None: ...
