"""The monitor's Prometheus metrics, with HAMi's names, labels and units (docs/protocol.md#metrics).

Everything is read at scrape time: NVML (or the fake) for the host cards, the shared regions
for the containers. A region that cannot be read leaves out that container's series only; a
failing GPU port or API leaves out the host or container series only. Every series carries
`zone="vGPU"`, as HAMi's registry adds it. `legacy=True` adds the pre-v2.9 names.
"""

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vgpu.app.exposition import ZONE
from vgpu.app.monitor.figures import DeviceFigures, device_figures, last_kernel_age
from vgpu.app.monitor.mig import ContainerMigDevice, realized_instances
from vgpu.app.monitor.pods import Owner, Owners
from vgpu.domain.pod import Pod
from vgpu.ports.accounting import AccountingPort, RegionUnavailable
from vgpu.ports.cluster import ClusterError
from vgpu.ports.gpu import GpuPort, GpuUnavailable, GpuUsage

log = logging.getLogger(__name__)

_HOST = ["node", "device_index", "device_uuid", "device_type"]
_LEGACY_HOST = ["nodeid", "deviceidx", "deviceuuid", "devicetype"]
_CTR = ["namespace", "pod", "container", "vdevice_index", "device_uuid"]
_LEGACY_CTR = ["podnamespace", "podname", "ctrname", "vdeviceid", "deviceuuid"]


@dataclass(frozen=True, slots=True)
class MonitorSources:
    """Where the figures come from; `pods` lists the pods bound to this node."""

    node: str
    gpus: GpuPort
    accounting: AccountingPort
    pods: Callable[[], Sequence[Pod]]
    clock: Callable[[], float] = time.time


class MonitorMetrics:
    def __init__(self, sources: MonitorSources, legacy: bool = False) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Host(sources, legacy))
        self.registry.register(_Containers(sources, legacy))

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _gauge(name: str, help_text: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, labels=[*labels, "zone"])


class _Host(Collector):
    def __init__(self, sources: MonitorSources, legacy: bool) -> None:
        self._sources = sources
        self._legacy = legacy

    def collect(self) -> Iterator[Metric]:
        try:
            cards = self._sources.gpus.read_usage()
        except GpuUnavailable as err:
            log.warning("no host GPU figures: %s", err)
            return
        memory = _gauge("hami_host_gpu_memory_used_bytes", "GPU memory in use (NVML).", _HOST)
        busy = _gauge("hami_host_gpu_utilization_ratio", "GPU utilization, 0-100 (NVML).", _HOST)
        controller = _gauge(
            "hami_host_gpu_memory_controller_utilization_ratio",
            "GPU memory controller utilization, 0-100 (NVML).",
            _HOST[1:],
        )
        families = [memory, busy, controller]
        legacy_memory = _gauge("HostGPUMemoryUsage", "GPU device memory usage", _LEGACY_HOST)
        legacy_busy = _gauge("HostCoreUtilization", "GPU core utilization", _LEGACY_HOST)
        if self._legacy:
            families += [legacy_memory, legacy_busy]
        for card in cards:
            labels = [self._sources.node, str(card.index), card.uuid, _device_type(card), ZONE]
            if card.memory_used_bytes is not None:
                memory.add_metric(labels, card.memory_used_bytes)
                legacy_memory.add_metric(labels, card.memory_used_bytes)
            if card.utilization_percent is not None:
                busy.add_metric(labels, card.utilization_percent)
                legacy_busy.add_metric(labels, card.utilization_percent)
            if card.memory_controller_percent is not None:
                controller.add_metric(labels[1:], card.memory_controller_percent)
        yield from families


def _device_type(card: GpuUsage) -> str:
    # HAMi's monitor prefixes unconditionally, unlike the register annotation.
    return f"NVIDIA-{card.name}"


class _Containers(Collector):
    def __init__(self, sources: MonitorSources, legacy: bool) -> None:
        self._sources = sources
        self._legacy = legacy

    def collect(self) -> Iterator[Metric]:
        sources = self._sources
        try:
            owners = Owners(sources.pods(), sources.node)
        except ClusterError as err:
            log.warning("no container figures: cannot list this node's pods (%s)", err)
            return
        out = _ContainerFamilies(self._legacy)
        now = sources.clock()
        for entry in sources.accounting.list_dirs():
            found = owners.of(entry)
            if not found:
                continue
            try:
                region = sources.accounting.read(entry)
            except RegionUnavailable as err:
                log.debug("no figures for %s: %s", entry.path, err)
                continue
            age = last_kernel_age(region, now)
            for device in device_figures(region):
                for owner in found:
                    out.add(owner, device, age)
        for pod in owners.pods:
            for instance in realized_instances(pod):
                out.add_mig(pod, instance)
        yield from out.families()


class _ContainerFamilies:
    def __init__(self, legacy: bool) -> None:
        self._legacy = legacy
        self.used = _gauge(
            "hami_vgpu_memory_used_bytes", "Device memory a container uses, bytes.", _CTR
        )
        self.limit = _gauge(
            "hami_vgpu_memory_limit_bytes", "Device memory limit of a container, bytes.", _CTR
        )
        self.memory = _gauge(
            "hami_container_device_memory_bytes", "Device memory a container uses, bytes.", _CTR
        )
        self.utilization = _gauge(
            "hami_container_device_utilization_ratio",
            "SM utilization of a container's processes on a device, percent.",
            _CTR,
        )
        self.last_kernel = _gauge(
            "hami_container_last_kernel_elapsed_seconds",
            "Seconds since the container last launched a kernel.",
            _CTR,
        )
        self.context = _gauge(
            "hami_vgpu_memory_context_bytes", "CUDA context memory of a container, bytes.", _CTR
        )
        self.module = _gauge(
            "hami_vgpu_memory_module_bytes", "CUDA module memory of a container, bytes.", _CTR
        )
        self.buffer = _gauge(
            "hami_vgpu_memory_buffer_bytes", "Buffer (data) memory of a container, bytes.", _CTR
        )
        process = [*_CTR, "pid", "host_pid"]
        self.process_memory = _gauge(
            "vgpu_container_process_memory_bytes",
            "Device memory one process of a container uses, bytes (pid inside the container; "
            "host_pid 0 until HAMi-core knows it).",
            process,
        )
        self.process_utilization = _gauge(
            "vgpu_container_process_utilization_ratio",
            "SM utilization of one process of a container on a device, percent.",
            process,
        )
        self.mig = _gauge(
            "hami_mig_device_info",
            "A realized MIG instance of a container (value 1).",
            [*_CTR, "mig_uuid", "profile", "gpu_instance_id", "compute_instance_id"],
        )
        self.legacy_mig = _gauge(
            "MigInfo", "MIG instance of a container", [*_LEGACY_CTR, "instanceid"]
        )
        self.legacy_used = _gauge(
            "vGPU_device_memory_usage_in_bytes", "vGPU device usage", _LEGACY_CTR
        )
        self.legacy_limit = _gauge(
            "vGPU_device_memory_limit_in_bytes", "vGPU device limit", _LEGACY_CTR
        )
        self.legacy_desc = _gauge(
            "Device_memory_desc_of_container",
            "Container device memory description",
            [*_LEGACY_CTR, "context", "module", "data", "offset"],
        )
        self.legacy_utilization = _gauge(
            "Device_utilization_desc_of_container", "Container device utilization", _LEGACY_CTR
        )
        self.legacy_last_kernel = _gauge(
            "Device_last_kernel_of_container", "Container device last kernel time", _LEGACY_CTR
        )

    def add(self, owner: Owner, device: DeviceFigures, last_kernel_age: float | None) -> None:
        labels = [owner.namespace, owner.pod, owner.container, str(device.index), device.uuid]
        labels.append(ZONE)
        self.used.add_metric(labels, device.used)
        self.limit.add_metric(labels, device.limit)
        self.memory.add_metric(labels, device.used)
        self.utilization.add_metric(labels, device.utilization)
        self.context.add_metric(labels, device.context)
        self.module.add_metric(labels, device.module)
        self.buffer.add_metric(labels, device.data)
        if last_kernel_age is not None:
            self.last_kernel.add_metric(labels, last_kernel_age)
            self.legacy_last_kernel.add_metric(labels, last_kernel_age)
        for process in device.processes:
            per_process = [*labels[:-1], str(process.pid), str(process.host_pid), ZONE]
            self.process_memory.add_metric(per_process, process.memory)
            self.process_utilization.add_metric(per_process, process.sm)
        self.legacy_used.add_metric(labels, device.used)
        self.legacy_limit.add_metric(labels, device.limit)
        kinds = [str(device.context), str(device.module), str(device.data), str(device.other)]
        self.legacy_desc.add_metric([*labels[:-1], *kinds, ZONE], device.used)
        self.legacy_utilization.add_metric(labels, device.utilization)

    def add_mig(self, pod: Pod, instance: ContainerMigDevice) -> None:
        labels = [
            pod.namespace,
            pod.name,
            instance.container,
            str(instance.device_index),
            instance.gpu_uuid,
        ]
        details = [instance.mig_uuid, instance.profile, str(instance.gpu_instance)]
        self.mig.add_metric([*labels, *details, str(instance.compute_instance), ZONE], 1)
        self.legacy_mig.add_metric([*labels, str(instance.gpu_instance), ZONE], 1)

    def families(self) -> Iterable[Metric]:
        current = [
            self.used,
            self.limit,
            self.memory,
            self.utilization,
            self.last_kernel,
            self.context,
            self.module,
            self.buffer,
            self.process_memory,
            self.process_utilization,
            self.mig,
        ]
        legacy = [
            self.legacy_used,
            self.legacy_limit,
            self.legacy_desc,
            self.legacy_utilization,
            self.legacy_last_kernel,
            self.legacy_mig,
        ]
        return [*current, *legacy] if self._legacy else current
