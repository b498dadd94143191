"""Prometheus metrics with HAMi's names, labels and units (HAMi v2.10; docs/protocol.md#metrics).

Allocation gauges are computed from a state snapshot at every scrape, so they are never stale.
Every `hami_*` series carries HAMi's constant label `zone="vGPU"`, except `hami_build_info`.
Only the leader publishes allocation and quota gauges: every replica holds the same state,
and a ServiceMonitor scraping all of them would otherwise count each GPU once per replica.
`legacy=True` adds HAMi's pre-v2.9 names (`GPUDeviceMemoryLimit`, `vGPUMemoryAllocated`, ...)
with their old label names, as HAMi's `--legacy-metrics` does.
Each SchedulerMetrics owns its registry (no process-wide default registry) for its own
instruments; the state's gauges are written straight to the text format (`_Gauge`).
"""

import platform
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from vgpu.app.exposition import ZONE
from vgpu.app.scheduler.state import SchedulerState, Snapshot
from vgpu.domain import PodGrants, QuotaLimits, Usage, Vendor

MIB = 1 << 20
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

# label names per family: (HAMi v2.10, legacy twin)
_CARD = (
    ("node", "device_uuid", "device_index", "device_type"),
    ("nodeid", "deviceuuid", "deviceidx", "devicetype"),
)
_CARD_CORES = (
    ("node", "device_uuid", "device_index", "device_cores", "device_type"),
    ("nodeid", "deviceuuid", "deviceidx", "devicecores", "devicetype"),
)
_OVERVIEW = (
    ("node", "device_uuid", "device_index", "device_cores", "device_memory_limit", "device_type"),
    ("nodeid", "deviceuuid", "deviceidx", "devicecores", "devicememorylimit", "devicetype"),
)
_RATIO_LEGACY = ("nodeid", "deviceuuid", "deviceidx")
_CONTAINER = (
    ("namespace", "node", "pod", "container_index", "device_uuid"),
    ("podnamespace", "nodename", "podname", "containeridx", "deviceuuid"),
)
_QUOTA_USED = (("namespace", "quota_name", "limit"), ("quotanamespace", "quotaName", "limit"))


class SchedulerMetrics:
    """The registry `/metrics` renders, and the instruments the HTTP layer feeds."""

    def __init__(
        self,
        state: SchedulerState,
        vendor: Vendor,
        is_leader: Callable[[], bool],
        legacy: bool = False,
        unsigned_counted: Callable[[], int] = lambda: 0,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram(
            "vgpu_scheduler_request_duration_seconds",
            "Time to answer a webhook or extender request, by verb (filter, prioritize, bind, "
            "webhook, webhook_dra).",
            ["verb"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.outcomes = Counter(
            "vgpu_scheduler_requests",
            "Requests answered, by verb and outcome (placed, unplaced, error, allowed, denied).",
            ["verb", "outcome"],
            registry=self.registry,
        )
        self._state = _StateGauges(state, vendor, is_leader, legacy, unsigned_counted)

    def render(self) -> bytes:
        text = "".join(gauge.text() for gauge in self._state.collect())
        return text.encode() + generate_latest(self.registry)


class _Gauge:
    """A gauge family written straight to Prometheus' text format.

    prometheus_client's generic writer validates and escapes every label name of every sample:
    three quarters of a scrape at 100,000 series. Label names here are fixed identifiers, so
    only values need escaping.
    """

    __slots__ = ("_help", "_labels", "_lines", "name")

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        self.name = name
        self._help = help_text.replace("\\", "\\\\").replace("\n", "\\n")
        self._labels = tuple(labels)
        self._lines: list[str] = []

    def add_metric(self, values: Sequence[str], value: float) -> None:
        pairs = ",".join(f'{n}="{_escape(v)}"' for n, v in zip(self._labels, values, strict=True))
        sample = f"{self.name}{{{pairs}}}" if pairs else self.name
        self._lines.append(f"{sample} {float(value)!r}\n")

    def text(self) -> str:
        head = f"# HELP {self.name} {self._help}\n# TYPE {self.name} gauge\n"
        return head + "".join(self._lines)


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def build_info() -> _Gauge:
    """`hami_build_info` with HAMi's label names; the Go fields describe the Python runtime."""
    try:
        package = version("vgpu")
    except PackageNotFoundError:
        package = "unknown"
    info = _Gauge(
        "hami_build_info",
        "Build information of this vgpu process (go_version and compiler name the Python runtime).",
        ["version", "revision", "build_date", "go_version", "compiler", "platform"],
    )
    machine = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    info.add_metric(
        [
            package,
            "unknown",
            "unknown",
            f"python{platform.python_version()}",
            platform.python_implementation().lower(),
            f"{sys.platform}/{machine}",
        ],
        1,
    )
    return info


@dataclass
class _Family:
    """One HAMi gauge and, when legacy names are on, its pre-v2.9 twin; one `add` feeds both."""

    current: _Gauge
    twin: _Gauge | None

    @classmethod
    def of(
        cls,
        name: str,
        legacy_name: str | None,
        help_text: str,
        labels: tuple[Sequence[str], Sequence[str]],
        legacy: bool,
    ) -> "_Family":
        current = _Gauge(name, help_text, [*labels[0], "zone"])
        twin = (
            _Gauge(legacy_name, help_text, [*labels[1], "zone"]) if legacy and legacy_name else None
        )
        return cls(current, twin)

    def add(self, values: Sequence[str], value: float, twin_values: Sequence[str] = ()) -> None:
        self.current.add_metric([*values, ZONE], value)
        if self.twin is not None:
            self.twin.add_metric([*(twin_values or values), ZONE], value)

    def families(self) -> list[_Gauge]:
        return [self.current] if self.twin is None else [self.current, self.twin]


class _StateGauges:
    def __init__(
        self,
        state: SchedulerState,
        vendor: Vendor,
        is_leader: Callable[[], bool],
        legacy: bool,
        unsigned_counted: Callable[[], int],
    ) -> None:
        self._state = state
        self._vendor = vendor
        self._is_leader = is_leader
        self._legacy = legacy
        self._unsigned_counted = unsigned_counted

    def collect(self) -> Iterable[_Gauge]:
        yield build_info()
        leading = self._is_leader()
        leader = _Gauge("hami_scheduler_is_leader", "1 if this replica leads.")
        leader.add_metric([], 1 if leading else 0)
        synced = _Gauge("hami_scheduler_cache_synced", "1 once the cluster has been read.")
        synced.add_metric([], 1 if self._state.synced else 0)
        yield from (leader, synced)
        if not leading:
            return
        with self._state.locked():  # the grants per container, from the same moment
            snapshot = self._state.snapshot()
            grants = {a.pod: a.grants for a in self._state.ledger.pods()}
        yield from self._cards(snapshot)
        yield from self._containers(
            (key, node, grants.get(key, ())) for key, node, _ in snapshot.pods
        )
        yield from self._quotas(snapshot.quotas)
        unsigned = _Gauge(
            "vgpu_unsigned_grants_counted",
            "Bound pods counted without a grant signed with vgpu's key (HAMi's, or edited "
            "since); HAMi's pods are gone and signing can be enforced when this is 0.",
        )
        unsigned.add_metric([], self._unsigned_counted())
        yield unsigned

    def _family(
        self,
        name: str,
        legacy_name: str | None,
        help_text: str,
        labels: tuple[Sequence[str], Sequence[str]],
    ) -> _Family:
        return _Family.of(name, legacy_name, help_text, labels, self._legacy)

    def _cards(self, snapshot: Snapshot) -> Iterable[_Gauge]:
        f = self._family
        memory_limit = f(
            "hami_gpu_memory_limit_bytes",
            "GPUDeviceMemoryLimit",
            "Device memory limit for a certain GPU, bytes.",
            _CARD,
        )
        core_limit = f(
            "hami_gpu_core_limit_ratio",
            "GPUDeviceCoreLimit",
            "Device core limit for a certain GPU (100 per GPU).",
            _CARD,
        )
        memory_used = f(
            "hami_gpu_memory_allocated_bytes",
            "GPUDeviceMemoryAllocated",
            "Device memory allocated for a certain GPU, bytes.",
            _CARD_CORES,
        )
        shared = f(
            "hami_gpu_shared_count",
            "GPUDeviceSharedNum",
            "Number of containers sharing this GPU.",
            _CARD,
        )
        core_used = f(
            "hami_gpu_core_allocated_ratio",
            "GPUDeviceCoreAllocated",
            "Device core allocated for a certain GPU.",
            _CARD,
        )
        overview = f(
            "hami_node_gpu_overview",
            "nodeGPUOverview",
            "GPU overview on a certain node: memory allocated, bytes.",
            _OVERVIEW,
        )
        ratio = f(
            "hami_node_gpu_memory_allocated_ratio",
            "nodeGPUMemoryPercentage",
            "GPU memory allocated as a fraction (0-1) of a certain GPU.",
            (_CARD[0], _RATIO_LEGACY),
        )
        for view in snapshot.views:
            for device in view.devices:
                usage = view.usage.get(device.uuid) or Usage()
                card = [view.name, device.uuid, str(device.index), device.type]
                cores = str(device.cores)
                with_cores = [*card[:3], cores, device.type]
                memory_limit.add(card, device.memory * MIB)
                core_limit.add(card, device.cores)
                memory_used.add(with_cores, usage.memory * MIB)
                shared.add(card, usage.slices)
                core_used.add(card, usage.cores)
                total = str(device.memory)
                overview.add([*card[:3], cores, total, device.type], usage.memory * MIB)
                if device.memory > 0:
                    ratio.add(card, usage.memory / device.memory, card[:3])
        for family in (memory_limit, core_limit, memory_used, shared, core_used, overview, ratio):
            yield from family.families()

    def _containers(self, pods: Iterable[tuple[str, str, PodGrants]]) -> Iterable[_Gauge]:
        f = self._family
        memory = f(
            "hami_vgpu_memory_allocated_bytes",
            "vGPUMemoryAllocated",
            "vGPU memory allocated from a container, bytes.",
            _CONTAINER,
        )
        cores = f(
            "hami_vgpu_core_allocated_ratio",
            "vGPUCoreAllocated",
            "vGPU core allocated from a container.",
            _CONTAINER,
        )
        for key, node, grants in pods:
            namespace, _, name = key.partition("/")
            # container_index: the position in the pod's device list, init containers first
            for index, container in enumerate(grants):
                per_card: dict[str, Usage] = {}
                for grant in container:
                    per_card[grant.uuid] = per_card.get(grant.uuid, Usage()) + grant.usage
                for uuid, usage in per_card.items():
                    values = [namespace, node, name, str(index), uuid]
                    memory.add(values, usage.memory * MIB)
                    cores.add(values, usage.cores)
        return [*memory.families(), *cores.families()]

    def _quotas(self, quotas: Iterable[tuple[str, QuotaLimits, Usage]]) -> Iterable[_Gauge]:
        used = self._family(
            "hami_resource_quota_used",
            "QuotaUsed",
            "resourcequota usage for a certain device (MiB, core points or cards).",
            _QUOTA_USED,
        )
        limit = self._family(
            "hami_resource_quota_limit",
            None,
            "resourcequota limit for a certain device.",
            (("namespace", "quota_name"), ()),
        )
        v = self._vendor
        for namespace, limits, amount in quotas:
            for resource, cap, value in (
                (v.memory_resource, limits.memory, amount.memory),
                (v.cores_resource, limits.cores, amount.cores),
                (v.count_resource, limits.cards, amount.slices),
            ):
                if cap is None:
                    continue
                used.add([namespace, resource, str(cap)], value)
                limit.add([namespace, resource], cap)
        return [*used.families(), *limit.families()]
