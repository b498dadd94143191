"""A fake GPU inventory (GpuPort) from a YAML file or a list, for development and tests.

The file (`--fake-gpus FILE`) looks like this; see docs/gpus.md::

    gpus:
      - uuid: GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448   # required, unique
        name: Tesla V100-PCIE-32GB                       # required, NVML model name
        memory_mib: 32768                                # required, > 0
        index: 0          # default: the entry's position; unique
        numa: 0           # default 0; -1: unknown (the kubelet gets no NUMA node)
        mig: false        # default false
        healthy: true     # default true; false reports the GPU unhealthy
        reason: ""        # optional, shown when healthy is false
        used_mib: 0       # default 0; memory in use, as `vgpu monitor` reports it
        utilization: 0    # default 0; percent busy (NVML utilization.gpu)
        memory_utilization: 0  # default 0; percent (NVML utilization.memory)
        architecture: ""  # optional, e.g. Volta; published by vgpu dra-driver when set
        pci_bus_id: ""    # optional, e.g. 0000:3b:00.0; published by vgpu dra-driver
        mig_profiles:     # with mig: true, the GPU instance profiles create_mig_instance offers
                          # (chosen, as NVML does, by the part of the name before the `.`)
          - {name: 1g.5gb, slices: 1, memory_mib: 4864, instances: 7,
             placements: [{start: 0, size: 1}, {start: 1, size: 1}]}
    driver_version: ""    # optional, e.g. 550.54.15: the driver's, for every GPU
    cuda_driver_version: ""  # optional, e.g. 12.4
    links:                # optional: how GPUs connect (read_topology); unlisted pairs are
      - between: [GPU-a, GPU-b]   # cross-CPU PCIe without NVLink
        pcie: single-switch       # same-board, single-switch, multi-switch, host-bridge,
                                  # same-cpu or cross-cpu
        nvlinks: 4                # default 0; NVLinks from the first GPU to the second
        nvlinks_back: 4           # default: nvlinks; differ to model an asymmetric pair

A running process notices when the file changes (its mtime, size or inode) and reports each
GPU whose `healthy` value changed, so tests can break a GPU by rewriting the file. Tests in the
same process can call `mark_unhealthy` / `mark_healthy` instead.
"""

import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vgpu.domain.inventory import GpuInfo, HealthEvent
from vgpu.domain.mig import MigInstance, MigPlacement, MigProfile
from vgpu.domain.topology import MAX_NVLINKS, GpuLink, PcieLink
from vgpu.ports.gpu import GpuDetails, GpuUnavailable, GpuUsage, MigError

log = logging.getLogger(__name__)

_MIB = 1024 * 1024


class FakeGpuFileError(GpuUnavailable):
    """The fake GPU file cannot be read or is invalid; the message names the entry and field."""


class _PlacementEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    start: int = Field(ge=0)
    size: int = Field(ge=1)


class _MigProfileEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str = Field(min_length=1)
    slices: int = Field(ge=1)
    memory_mib: int = Field(gt=0)
    core: int = Field(default=0, ge=0, le=100)
    instances: int = Field(default=1, ge=1)
    placements: list[_PlacementEntry] = Field(min_length=1)

    def profile(self) -> MigProfile:
        placements = tuple(MigPlacement(p.start, p.size) for p in self.placements)
        return MigProfile(
            self.name, self.slices, self.memory_mib, self.core, placements, self.instances
        )


class _GpuEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    uuid: str = Field(min_length=1)
    name: str = Field(min_length=1)
    memory_mib: int = Field(gt=0)
    index: int | None = Field(default=None, ge=0)
    numa: int = Field(default=0, ge=-1)
    mig: bool = False
    healthy: bool = True
    reason: str = ""
    used_mib: int = Field(default=0, ge=0)
    utilization: int = Field(default=0, ge=0, le=100)
    memory_utilization: int = Field(default=0, ge=0, le=100)
    architecture: str = Field(default="", max_length=64)
    pci_bus_id: str = Field(default="", max_length=64)
    mig_profiles: list[_MigProfileEntry] = []


class _LinkEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    between: list[str] = Field(min_length=2, max_length=2)
    pcie: Literal[
        "same-board", "single-switch", "multi-switch", "host-bridge", "same-cpu", "cross-cpu"
    ]
    nvlinks: int = Field(default=0, ge=0, le=MAX_NVLINKS)
    nvlinks_back: int | None = Field(default=None, ge=0, le=MAX_NVLINKS)


class _GpuFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    gpus: list[_GpuEntry]
    links: list[_LinkEntry] = []
    driver_version: str = Field(default="", max_length=64)
    cuda_driver_version: str = Field(default="", max_length=64)


class _Inventory:
    """What one reading of the file says: the GPUs, which are unhealthy (uuid -> reason), and
    the usage figures given (uuid -> (used MiB, utilization, memory utilization))."""

    def __init__(
        self,
        gpus: list[GpuInfo],
        unhealthy: dict[str, str],
        usage: dict[str, tuple[int, int, int]] | None = None,
        links: Iterable[GpuLink] = (),
        mig_profiles: Mapping[str, tuple[MigProfile, ...]] | None = None,
        details: Mapping[str, GpuDetails] | None = None,
    ) -> None:
        self.gpus = gpus
        self.mig_profiles = dict(mig_profiles or {})
        self.details = dict(details or {})
        self.unhealthy = unhealthy
        self.usage = usage or {}
        self.links = {(link.source, link.target): link for link in links}


class FakeGpus:
    """Implements GpuPort from a fixed list of GPUs, or from a YAML file it keeps watching.

    Every GPU starts healthy as far as the consumer knows; those listed unhealthy (in the file
    or `unhealthy`) are reported by the first `wait_for_health_events`.
    """

    def __init__(
        self,
        gpus: Iterable[GpuInfo] = (),
        unhealthy: Mapping[str, str] | None = None,
        *,
        links: Iterable[GpuLink] = (),
        mig_profiles: Mapping[str, Iterable[MigProfile]] | None = None,
        path: Path | None = None,
        poll_interval_s: float = 0.1,
    ) -> None:
        self._cond = threading.Condition()
        self._path = path
        self._poll_interval_s = poll_interval_s
        self._stamp: tuple[int, int, int] | None = None
        self._gpus: list[GpuInfo] = []
        self._usage: dict[str, tuple[int, int, int]] = {}
        self._links: dict[tuple[str, str], GpuLink] = {}
        self._mig_profiles: dict[str, tuple[MigProfile, ...]] = {}
        self._details: dict[str, GpuDetails] = {}
        self._mig_instances: list[MigInstance] = []
        self._next_instance_id = 1
        self._healthy: dict[str, bool] = {}
        self._pending: list[HealthEvent] = []
        self._closed = False
        profiles = {uuid: tuple(p) for uuid, p in (mig_profiles or {}).items()}
        self._apply(
            _Inventory(list(gpus), dict(unhealthy or {}), links=links, mig_profiles=profiles),
            source="the test set-up",
        )

    @classmethod
    def from_file(cls, path: Path, poll_interval_s: float = 0.1) -> "FakeGpus":
        """Read and validate `path` now (FakeGpuFileError if invalid), then watch it."""
        fake = cls(path=path, poll_interval_s=poll_interval_s)
        with fake._cond:
            fake._stamp = _stamp(path)
            fake._apply(_load(path), source=str(path))
        log.info("fake GPUs from %s: %d GPU(s)", path, len(fake._gpus))
        return fake

    # GpuPort ----------------------------------------------------------------------------------
    def discover(self) -> list[GpuInfo]:
        """The GPUs as the file says now; GpuUnavailable when it lists none."""
        with self._cond:
            if self._closed:
                raise GpuUnavailable("the fake GPU inventory is closed")
            self._refresh()
            if not self._gpus:
                where = f"the fake GPU file {self._path}" if self._path else "the fake inventory"
                raise GpuUnavailable(f"{where} lists no GPUs")
            return list(self._gpus)

    def wait_for_health_events(self, timeout_s: float) -> list[HealthEvent]:
        """Health changes (marks, file edits) within `timeout_s`; polls the file meanwhile."""
        deadline = time.monotonic() + max(timeout_s, 0.0)
        with self._cond:
            while not self._closed:
                self._refresh()
                if self._pending:
                    events, self._pending = self._pending, []
                    return events
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                if self._path is not None:
                    remaining = min(remaining, self._poll_interval_s)
                self._cond.wait(remaining)
            return []

    def read_usage(self) -> list[GpuUsage]:
        """Each GPU's usage as the file says now (zero where it says nothing)."""
        with self._cond:
            if self._closed:
                raise GpuUnavailable("the fake GPU inventory is closed")
            self._refresh()
            found = []
            for gpu in self._gpus:
                used_mib, busy, memory_busy = self._usage.get(gpu.uuid, (0, 0, 0))
                found.append(
                    GpuUsage(gpu.uuid, gpu.index, gpu.name, used_mib * _MIB, busy, memory_busy)
                )
            return found

    def read_topology(self) -> list[GpuLink]:
        """Every ordered pair of the GPUs as `links` says; unlisted pairs are cross-CPU PCIe."""
        with self._cond:
            if self._closed:
                raise GpuUnavailable("the fake GPU inventory is closed")
            self._refresh()
            return [
                self._links.get((a.uuid, b.uuid), GpuLink(a.uuid, b.uuid, PcieLink.CROSS_CPU))
                for a in self._gpus
                for b in self._gpus
                if a.uuid != b.uuid
            ]

    def gpu_details(self) -> dict[str, GpuDetails]:
        """GpuDetailsPort: what the file says of each GPU (empty details where it says none)."""
        with self._cond:
            self._refresh()
            return {g.uuid: self._details.get(g.uuid, GpuDetails()) for g in self._gpus}

    # MigPort ----------------------------------------------------------------------------------
    def mig_profiles(self) -> dict[str, tuple[MigProfile, ...]]:
        """The profiles of every GPU marked `mig: true`, by uuid."""
        with self._cond:
            self._refresh()
            return {g.uuid: self._mig_profiles.get(g.uuid, ()) for g in self._gpus if g.mig_enabled}

    def mig_instances(self) -> list[MigInstance]:
        with self._cond:
            return list(self._mig_instances)

    def create_mig_instance(
        self, gpu_uuid: str, profile: str, placement: MigPlacement
    ) -> MigInstance:
        """Models NVML: the profile's slice group must be offered at that placement, and the
        slices free. The instance ids count up from 1; the compute instance id is 0."""
        with self._cond:
            self._refresh()
            where = f"GPU {gpu_uuid}, profile {profile} at {placement.start}+{placement.size}"
            gpu = next((g for g in self._gpus if g.uuid == gpu_uuid), None)
            if gpu is None or not gpu.mig_enabled:
                raise MigError(f"{where}: no such GPU in MIG mode")
            group = profile.partition(".")[0]  # as NVML, only `3g` of `3g.20gb` selects
            offered = next(
                (
                    p
                    for p in self._mig_profiles.get(gpu_uuid, ())
                    if p.name.partition(".")[0] == group
                ),
                None,
            )
            if offered is None:
                raise MigError(f"{where}: the GPU offers no such profile (no {group} profile)")
            if placement not in offered.placements:
                raise MigError(f"{where}: the scheduler selected an invalid placement")
            taken = next(
                (
                    i
                    for i in self._mig_instances
                    if i.gpu_uuid == gpu_uuid and i.placement.overlaps(placement)
                ),
                None,
            )
            if taken is not None:
                raise MigError(f"{where}: slices are taken by {taken.profile} ({taken.mig_uuid})")
            instance_id = self._next_instance_id
            self._next_instance_id += 1
            instance = MigInstance(
                gpu_uuid,
                profile,
                placement,
                f"MIG-{gpu_uuid.removeprefix('GPU-')}-{instance_id}",
                instance_id,
            )
            self._mig_instances.append(instance)
            log.info("fake MIG instance %s created: %s", instance.mig_uuid, where)
            return instance

    def destroy_mig_instance(self, instance: MigInstance) -> None:
        with self._cond:
            if instance in self._mig_instances:
                self._mig_instances.remove(instance)
                log.info("fake MIG instance %s destroyed", instance.mig_uuid)

    def close(self) -> None:
        """Wake any waiter; later waits return nothing."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # test controls ----------------------------------------------------------------------------
    def mark_unhealthy(self, uuid: str, reason: str = "marked unhealthy by a test") -> None:
        """Report `uuid` unhealthy to the next (or a waiting) `wait_for_health_events`."""
        self._set_health(uuid, False, reason)

    def mark_healthy(self, uuid: str, reason: str = "marked healthy by a test") -> None:
        """Report `uuid` healthy again (real NVML never does; the fake allows it for tests)."""
        self._set_health(uuid, True, reason)

    def health(self) -> dict[str, bool]:
        """Each GPU's current health, by uuid."""
        with self._cond:
            return dict(self._healthy)

    # internals --------------------------------------------------------------------------------
    def _set_health(self, uuid: str, healthy: bool, reason: str) -> None:
        with self._cond:
            if uuid not in self._healthy:
                known = ", ".join(self._healthy) or "none"
                raise ValueError(f"no fake GPU has uuid {uuid!r} (known: {known})")
            self._change(uuid, healthy, reason)
            self._cond.notify_all()

    def _change(self, uuid: str, healthy: bool, reason: str) -> None:
        if self._healthy.get(uuid) == healthy:
            return
        self._healthy[uuid] = healthy
        self._pending.append(HealthEvent(uuid=uuid, healthy=healthy, reason=reason))
        log.info("fake GPU %s is now %s: %s", uuid, "healthy" if healthy else "unhealthy", reason)

    def _apply(self, inventory: _Inventory, source: str) -> None:
        current = {gpu.uuid for gpu in inventory.gpus}
        for uuid in [u for u in self._healthy if u not in current]:
            self._change(uuid, False, f"removed from {source}")
            del self._healthy[uuid]
        self._gpus = inventory.gpus
        self._usage = inventory.usage
        self._links = inventory.links
        self._mig_profiles = inventory.mig_profiles
        self._details = inventory.details
        for gpu in inventory.gpus:
            self._healthy.setdefault(gpu.uuid, True)
            reason = inventory.unhealthy.get(gpu.uuid)
            if reason is None:
                self._change(gpu.uuid, True, f"marked healthy in {source}")
            else:
                self._change(gpu.uuid, False, reason or f"marked unhealthy in {source}")

    def _refresh(self) -> None:
        if self._path is None:
            return
        stamp = _stamp(self._path)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            inventory = _load(self._path)
        except FakeGpuFileError as err:
            log.warning("keeping the previous fake GPUs: %s", err)
            return
        self._apply(inventory, source=str(self._path))


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino)


def _load(path: Path) -> _Inventory:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise FakeGpuFileError(f"{path}: cannot read the fake GPU file ({err.strerror})") from err
    except UnicodeDecodeError as err:
        raise FakeGpuFileError(f"{path}: not UTF-8 text ({err.reason})") from err
    except yaml.YAMLError as err:
        raise FakeGpuFileError(f"{path}: not valid YAML ({_yaml_problem(err)})") from err
    if not isinstance(raw, dict):
        got = "an empty file" if raw is None else f"a {type(raw).__name__}"
        raise FakeGpuFileError(f"{path}: expected a mapping with a `gpus:` list, got {got}")
    try:
        parsed = _GpuFile.model_validate(raw)
    except ValidationError as err:
        raise FakeGpuFileError(f"{path}: {_validation_problem(err, raw)}") from err
    return _inventory(parsed, path)


def _inventory(parsed: _GpuFile, path: Path) -> _Inventory:
    gpus: list[GpuInfo] = []
    unhealthy: dict[str, str] = {}
    usage: dict[str, tuple[int, int, int]] = {}
    uuids: dict[str, int] = {}
    indexes: dict[int, int] = {}
    for position, entry in enumerate(parsed.gpus):
        index = position if entry.index is None else entry.index
        if entry.uuid in uuids:
            raise FakeGpuFileError(
                f"{path}: gpus[{position}].uuid: {entry.uuid} is already used by "
                f"gpus[{uuids[entry.uuid]}]"
            )
        if index in indexes:
            raise FakeGpuFileError(
                f"{path}: gpus[{position}].index: {index} is already used by gpus[{indexes[index]}]"
            )
        if entry.mig_profiles and not entry.mig:
            raise FakeGpuFileError(
                f"{path}: gpus[{position}] (uuid {entry.uuid}): mig_profiles needs mig: true"
            )
        uuids[entry.uuid] = position
        indexes[index] = position
        gpus.append(
            GpuInfo(
                uuid=entry.uuid,
                index=index,
                name=entry.name,
                memory_mib=entry.memory_mib,
                numa=entry.numa,
                mig_enabled=entry.mig,
            )
        )
        if not entry.healthy:
            unhealthy[entry.uuid] = entry.reason
        usage[entry.uuid] = (entry.used_mib, entry.utilization, entry.memory_utilization)
    profiles = {
        e.uuid: tuple(p.profile() for p in e.mig_profiles) for e in parsed.gpus if e.mig_profiles
    }
    details = {
        e.uuid: GpuDetails(
            e.architecture, e.pci_bus_id, parsed.driver_version, parsed.cuda_driver_version
        )
        for e in parsed.gpus
    }
    links = _links(parsed.links, uuids, path)
    return _Inventory(gpus, unhealthy, usage, links, profiles, details)


_PCIE = {
    "same-board": PcieLink.SAME_BOARD,
    "single-switch": PcieLink.SINGLE_SWITCH,
    "multi-switch": PcieLink.MULTI_SWITCH,
    "host-bridge": PcieLink.HOST_BRIDGE,
    "same-cpu": PcieLink.SAME_CPU,
    "cross-cpu": PcieLink.CROSS_CPU,
}


def _links(entries: list[_LinkEntry], uuids: Mapping[str, int], path: Path) -> list[GpuLink]:
    links: list[GpuLink] = []
    seen: dict[frozenset[str], int] = {}
    for position, entry in enumerate(entries):
        where = f"{path}: links[{position}].between"
        first, second = entry.between
        for uuid in entry.between:
            if uuid not in uuids:
                raise FakeGpuFileError(f"{where}: {uuid} is not one of the gpus")
        if first == second:
            raise FakeGpuFileError(f"{where}: names {first} twice; a link joins two GPUs")
        pair = frozenset(entry.between)
        if pair in seen:
            raise FakeGpuFileError(f"{where}: this pair is already linked by links[{seen[pair]}]")
        seen[pair] = position
        pcie = _PCIE[entry.pcie]
        back = entry.nvlinks if entry.nvlinks_back is None else entry.nvlinks_back
        links += [GpuLink(first, second, pcie, entry.nvlinks), GpuLink(second, first, pcie, back)]
    return links


def _validation_problem(err: ValidationError, raw: Mapping[str, Any]) -> str:
    first = err.errors()[0]
    loc = list(first["loc"])
    where = ".".join(str(part) for part in loc)
    if len(loc) >= 2 and loc[0] == "gpus" and isinstance(loc[1], int):
        where = f"gpus[{loc[1]}]"
        entry = raw["gpus"][loc[1]]
        if isinstance(entry, dict) and isinstance(entry.get("uuid"), str):
            where += f" (uuid {entry['uuid']})"
        if loc[2:]:
            where += ": " + ".".join(str(part) for part in loc[2:])
    messages = {
        "extra_forbidden": "unknown field",
        "model_type": "expected a mapping of GPU fields",
        "dict_type": "expected a mapping",
    }
    message = messages.get(first["type"], first["msg"])
    detail = "" if first["type"] == "missing" else f" (got {first['input']!r})"
    more = err.error_count() - 1
    tail = f"; and {more} more problem(s)" if more else ""
    return f"{where}: {message}{detail}{tail}"


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    return f"{problem} at line {mark.line + 1}" if mark is not None else str(problem)
