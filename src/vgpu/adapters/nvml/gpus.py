"""The node's real GPUs through NVML (pynvml): implements GpuPort."""

import logging
import os
import threading
from pathlib import Path
from typing import Any

from vgpu.adapters.nvml.details import read_details
from vgpu.adapters.nvml.errors import init_failure, no_gpu
from vgpu.adapters.nvml.health import XidWatcher
from vgpu.adapters.nvml.library import load_pynvml, text
from vgpu.adapters.nvml.mig import read_mig_capability
from vgpu.adapters.nvml.miginstances import create_instance, destroy_instance, list_instances
from vgpu.adapters.nvml.sysfs import UNKNOWN_NUMA, numa_node
from vgpu.adapters.nvml.topology import TopologyError, read_links
from vgpu.adapters.nvml.xids import XidFilter, xid_filter_from_env
from vgpu.domain.inventory import GpuInfo, HealthEvent
from vgpu.domain.mig import MigCapability, MigInstance, MigPlacement, MigProfile
from vgpu.domain.topology import GpuLink
from vgpu.ports.gpu import GpuDetails, GpuUnavailable, GpuUsage, MigError

log = logging.getLogger(__name__)

_MIB = 1024 * 1024


class NvmlGpus:
    """GPUs and their health from the NVIDIA driver.

    NVML is initialised by the first `discover` (or health wait) and shut down by `close`.
    `xids` defaults to the rule NVIDIA's device plugin derives from DP_DISABLE_HEALTHCHECKS and
    DP_ENABLE_HEALTHCHECKS in this process's environment; `sysfs_root` is where NUMA nodes are
    read (tests point it at a temp dir). Safe to use from two threads: one discovering, one
    waiting for health events.
    """

    def __init__(self, xids: XidFilter | None = None, sysfs_root: Path = Path("/sys")) -> None:
        self._nvml = load_pynvml()
        self._xids = xids if xids is not None else xid_filter_from_env(os.environ)
        self._sysfs_root = sysfs_root
        self._lock = threading.Lock()
        self._initialised = False
        self._closed = threading.Event()
        self._handles: dict[str, Any] = {}
        self._watcher: XidWatcher | None = None

    def discover(self) -> list[GpuInfo]:
        """Every GPU NVML lists, in NVML index order.

        Raises GpuUnavailable when NVML cannot start or finds no GPU. A GPU whose uuid, name or
        memory cannot be read is left out with an error in the log.
        """
        with self._lock:
            count = self._count()
            nvml = self._nvml
            if count == 0:
                raise GpuUnavailable(no_gpu())
            gpus: list[GpuInfo] = []
            problems: list[str] = []
            for index in range(count):
                try:
                    gpu, handle = self._read(index)
                except nvml.NVMLError as err:
                    problems.append(f"GPU {index}: {err}")
                    log.error("leaving out GPU %d: NVML could not read it (%s)", index, err)
                    continue
                gpus.append(gpu)
                self._handles.setdefault(gpu.uuid, handle)
            if not gpus:
                raise GpuUnavailable(
                    f"NVML lists {count} GPU(s) but none could be read: {'; '.join(problems)}"
                )
            return gpus

    def wait_for_health_events(self, timeout_s: float) -> list[HealthEvent]:
        """Health changes within `timeout_s` (see `vgpu.adapters.nvml.health` for the rules).

        The first call registers the GPUs for events (discovering them if `discover` was not
        called yet, which may raise GpuUnavailable); GPUs that cannot be registered are
        reported unhealthy by that call.
        """
        if self._closed.is_set():
            return []
        if not self._xids.checks_enabled:
            self._closed.wait(max(timeout_s, 0.0))
            return []
        watcher = self._watcher or self._start_watcher()
        if watcher is None:
            return []
        return watcher.wait(timeout_s)

    def read_usage(self) -> list[GpuUsage]:
        """Used memory and utilisation of every GPU NVML lists, in index order.

        A figure the GPU does not support (or NVML fails to read) is None; a GPU whose handle,
        uuid or name cannot be read is left out. Raises GpuUnavailable when NVML cannot start.
        """
        with self._lock:
            count = self._count()
            nvml = self._nvml
            found: list[GpuUsage] = []
            for index in range(count):
                try:
                    handle = nvml.nvmlDeviceGetHandleByIndex(index)
                    uuid = text(nvml.nvmlDeviceGetUUID(handle))
                    name = text(nvml.nvmlDeviceGetName(handle))
                except nvml.NVMLError as err:
                    log.warning("no usage for GPU %d: NVML could not name it (%s)", index, err)
                    continue
                memory = self._figure(index, "used memory", nvml.nvmlDeviceGetMemoryInfo, handle)
                rates = self._figure(
                    index, "utilization", nvml.nvmlDeviceGetUtilizationRates, handle
                )
                found.append(
                    GpuUsage(
                        uuid=uuid,
                        index=index,
                        name=name,
                        memory_used_bytes=None if memory is None else int(memory.used),
                        utilization_percent=None if rates is None else int(rates.gpu),
                        memory_controller_percent=None if rates is None else int(rates.memory),
                    )
                )
            return found

    def read_topology(self) -> list[GpuLink]:
        """PCIe and NVLink links between every ordered pair of the discovered GPUs.

        Discovers the GPUs first if `discover` was not called yet. Raises GpuUnavailable when
        NVML fails on any pair or reports a PCIe level vgpu does not know.
        """
        gpus = self._known()
        with self._lock:
            try:
                return read_links(self._nvml, gpus)
            except TopologyError as err:
                raise GpuUnavailable(str(err)) from err

    def gpu_details(self) -> dict[str, GpuDetails]:
        """Architecture, PCI bus id and driver versions of every discovered GPU, by uuid
        (GpuDetailsPort); discovers the GPUs first if needed."""
        gpus = self._known()
        with self._lock:
            return {
                uuid: read_details(self._nvml, handle, index)
                for index, (uuid, handle) in enumerate(gpus)
            }

    def mig_capabilities(self) -> dict[str, MigCapability]:
        """Each discovered GPU's MIG support, mode and (when on) profiles, by uuid.

        Raises GpuUnavailable when NVML fails for a reason other than "not supported".
        """
        gpus = self._known()
        with self._lock:
            try:
                return {uuid: read_mig_capability(self._nvml, handle) for uuid, handle in gpus}
            except self._nvml.NVMLError as err:
                raise GpuUnavailable(f"NVML could not read the MIG capability ({err})") from err

    # MigPort (checked against a patched driver only; see adapters/nvml/miginstances.py) -------
    def mig_profiles(self) -> dict[str, tuple[MigProfile, ...]]:
        """The instance profiles of every GPU whose MIG mode is on, by uuid."""
        return {
            uuid: capability.profiles
            for uuid, capability in self.mig_capabilities().items()
            if capability.enabled
        }

    def mig_instances(self) -> list[MigInstance]:
        """Every MIG device on the GPUs in MIG mode; MigError when NVML fails."""
        enabled = {uuid for uuid, c in self.mig_capabilities().items() if c.enabled}
        gpus = [(uuid, handle) for uuid, handle in self._known() if uuid in enabled]
        with self._lock:
            try:
                return [i for uuid, h in gpus for i in list_instances(self._nvml, uuid, h)]
            except self._nvml.NVMLError as err:
                raise MigError(f"NVML could not list the MIG instances ({err})") from err

    def create_mig_instance(
        self, gpu_uuid: str, profile: str, placement: MigPlacement
    ) -> MigInstance:
        handle = self._handle(gpu_uuid)
        with self._lock:
            return create_instance(self._nvml, gpu_uuid, handle, profile, placement)

    def destroy_mig_instance(self, instance: MigInstance) -> None:
        handle = self._handle(instance.gpu_uuid)
        with self._lock:
            destroy_instance(self._nvml, handle, instance)

    def close(self) -> None:
        """Stop watching events and shut NVML down; safe to call more than once."""
        self._closed.set()
        with self._lock:
            watcher, self._watcher = self._watcher, None
            if watcher is not None:
                watcher.close()
            if not self._initialised:
                return
            self._initialised = False
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError as err:
                log.warning("NVML shutdown failed (%s); ignoring", err)

    # internals --------------------------------------------------------------------------------
    def _count(self) -> int:
        """How many GPUs NVML sees, starting NVML first if needed; call it holding the lock.
        Raises GpuUnavailable once closed, or when NVML cannot start or count."""
        if self._closed.is_set():
            raise GpuUnavailable("the NVML adapter is closed")
        self._init()
        nvml = self._nvml
        try:
            return int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as err:
            raise GpuUnavailable(f"NVML could not count the GPUs ({err})") from err

    def _init(self) -> None:
        if self._initialised:
            return
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:
            raise GpuUnavailable(init_failure(nvml, err)) from err
        self._initialised = True
        try:
            version = text(nvml.nvmlSystemGetDriverVersion())
        except nvml.NVMLError:
            version = "unknown"
        log.info("NVML started (driver %s)", version)

    def _read(self, index: int) -> tuple[GpuInfo, Any]:
        nvml = self._nvml
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        gpu = GpuInfo(
            uuid=text(nvml.nvmlDeviceGetUUID(handle)),
            index=index,
            name=text(nvml.nvmlDeviceGetName(handle)),
            memory_mib=int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // _MIB,
            numa=self._numa(index, handle),
            mig_enabled=self._mig_enabled(index, handle),
        )
        return gpu, handle

    def _figure(self, index: int, what: str, read: Any, handle: Any) -> Any:
        """`read(handle)`, or None when the GPU does not support it or NVML fails."""
        nvml = self._nvml
        try:
            return read(handle)
        except nvml.NVMLError_NotSupported:
            return None
        except nvml.NVMLError as err:
            log.warning("GPU %d: NVML cannot read its %s (%s)", index, what, err)
            return None

    def _numa(self, index: int, handle: Any) -> int:
        nvml = self._nvml
        try:
            bus_id = nvml.nvmlDeviceGetPciInfo(handle).busId
        except nvml.NVMLError as err:
            log.warning(
                "GPU %d: NVML cannot read its PCI bus id (%s); NUMA node unknown", index, err
            )
            return UNKNOWN_NUMA
        return numa_node(bus_id, self._sysfs_root)

    def _mig_enabled(self, index: int, handle: Any) -> bool:
        nvml = self._nvml
        try:
            current, _pending = nvml.nvmlDeviceGetMigMode(handle)
        except nvml.NVMLError_NotSupported:
            return False
        except nvml.NVMLError as err:
            log.warning("GPU %d: NVML cannot read its MIG mode (%s); assuming off", index, err)
            return False
        return bool(current == nvml.NVML_DEVICE_MIG_ENABLE)

    def _known(self) -> list[tuple[str, Any]]:
        """(uuid, handle) of every discovered GPU, discovering them if needed."""
        if not self._handles:
            self.discover()
        with self._lock:
            if self._closed.is_set():
                raise GpuUnavailable("the NVML adapter is closed")
            return list(self._handles.items())

    def _handle(self, uuid: str) -> Any:
        handle = dict(self._known()).get(uuid)
        if handle is None:
            raise MigError(f"GPU {uuid}: not one of this node's GPUs")
        return handle

    def _start_watcher(self) -> XidWatcher | None:
        if not self._handles:
            self.discover()
        with self._lock:
            if self._closed.is_set():
                return None
            if self._watcher is None:
                watcher = XidWatcher(self._nvml, self._xids)
                watcher.start(self._handles)
                self._watcher = watcher
            return self._watcher
