"""Prometheus metrics: HAMi's `hami_*` names for allocation and quota, plus request latency.

Allocation gauges are computed from a state snapshot at every scrape, so they are never stale.
Each SchedulerMetrics owns its registry (no process-wide default registry).
"""

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vgpu.app.scheduler.state import SchedulerState
from vgpu.domain import QuotaLimits, Usage, Vendor

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MIB = 1 << 20
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class SchedulerMetrics:
    """The registry `/metrics` renders, and the instruments the HTTP layer feeds."""

    def __init__(
        self, state: SchedulerState, vendor: Vendor, is_leader: Callable[[], bool]
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram(
            "vgpu_scheduler_request_duration_seconds",
            "Time to answer a webhook or extender request, by verb (filter, prioritize, bind, "
            "webhook).",
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
        self.registry.register(_StateCollector(state, vendor, is_leader))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _StateCollector(Collector):
    def __init__(
        self, state: SchedulerState, vendor: Vendor, is_leader: Callable[[], bool]
    ) -> None:
        self._state = state
        self._vendor = vendor
        self._is_leader = is_leader

    def collect(self) -> Iterable[Metric]:
        snapshot = self._state.snapshot()
        card = ["node", "device_uuid", "device_index", "device_type", "zone"]
        used = [*card[:-1], "device_cores", "zone"]
        memory_limit = GaugeMetricFamily(
            "hami_gpu_memory_limit_bytes", "Registered memory of a GPU.", labels=card
        )
        core_limit = GaugeMetricFamily(
            "hami_gpu_core_limit_ratio", "Registered core capacity of a GPU (0-100).", labels=card
        )
        memory_used = GaugeMetricFamily(
            "hami_gpu_memory_allocated_bytes", "Memory granted on a GPU.", labels=used
        )
        core_used = GaugeMetricFamily(
            "hami_gpu_core_allocated_ratio", "Cores granted on a GPU (0-100).", labels=used
        )
        shared = GaugeMetricFamily(
            "hami_gpu_shared_count", "Containers sharing a GPU.", labels=used
        )
        for view in snapshot.views:
            for device in view.devices:
                usage = view.usage.get(device.uuid)
                base = [view.name, device.uuid, str(device.index), device.type]
                memory_limit.add_metric([*base, "vGPU"], device.memory * MIB)
                core_limit.add_metric([*base, "vGPU"], device.cores)
                with_cores = [*base, str(device.cores), "vGPU"]
                memory_used.add_metric(with_cores, (usage.memory if usage else 0) * MIB)
                core_used.add_metric(with_cores, usage.cores if usage else 0)
                shared.add_metric(with_cores, usage.slices if usage else 0)
        yield from (memory_limit, core_limit, memory_used, core_used, shared)
        yield from self._pods(snapshot.pods)
        yield from self._quotas(snapshot.quotas)
        leader = GaugeMetricFamily("hami_scheduler_is_leader", "1 if this replica leads.")
        leader.add_metric([], 1 if self._is_leader() else 0)
        synced = GaugeMetricFamily(
            "hami_scheduler_cache_synced", "1 once the cluster has been read."
        )
        synced.add_metric([], 1 if self._state.synced else 0)
        yield from (leader, synced)

    def _pods(self, pods: Iterable[tuple[str, str, dict[str, Usage]]]) -> Iterable[Metric]:
        labels = ["namespace", "node", "pod", "device_uuid", "zone"]
        memory = GaugeMetricFamily(
            "hami_vgpu_memory_allocated_bytes", "Memory a pod holds on a GPU.", labels=labels
        )
        cores = GaugeMetricFamily(
            "hami_vgpu_core_allocated_ratio", "Cores a pod holds on a GPU (0-100).", labels=labels
        )
        for key, node, footprint in pods:
            namespace, _, name = key.partition("/")
            for uuid, usage in footprint.items():
                values = [namespace, node, name, uuid, "vGPU"]
                memory.add_metric(values, usage.memory * MIB)
                cores.add_metric(values, usage.cores)
        return (memory, cores)

    def _quotas(self, quotas: Iterable[tuple[str, QuotaLimits, Usage]]) -> Iterable[Metric]:
        used_family = GaugeMetricFamily(
            "hami_resource_quota_used",
            "GPU quota a namespace uses (memory in MiB, cores in percent points, cards).",
            labels=["namespace", "quota_name", "limit", "zone"],
        )
        limit_family = GaugeMetricFamily(
            "hami_resource_quota_limit",
            "GPU quota limit of a namespace.",
            labels=["namespace", "quota_name", "zone"],
        )
        v = self._vendor
        for namespace, limits, used in quotas:
            for resource, limit, amount in (
                (v.memory_resource, limits.memory, used.memory),
                (v.cores_resource, limits.cores, used.cores),
                (v.count_resource, limits.cards, used.slices),
            ):
                if limit is None:
                    continue
                used_family.add_metric([namespace, resource, str(limit), "vGPU"], amount)
                limit_family.add_metric([namespace, resource, "vGPU"], limit)
        return (used_family, limit_family)
