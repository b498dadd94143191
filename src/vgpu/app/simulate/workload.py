"""The scenario made concrete: node manifests with registered cards, and the seeded pod stream."""

import math
import random
import uuid
from dataclasses import dataclass
from typing import Any

from vgpu.domain import NVIDIA, ClusterNode, Vendor, encode_node_devices, node_from_manifest
from vgpu.domain.inventory import GpuInfo, SharingConfig, register_device

from .scenario import (
    Choice,
    ExponentialRuntime,
    FixedRuntime,
    LognormalRuntime,
    NodePool,
    Range,
    Runtime,
    Sample,
    Scenario,
    UniformRuntime,
    Workload,
)

_UUIDS = uuid.UUID("6f1b1c1e-7a43-4b59-9a8e-5d1b2c3e4f50")  # namespace for stable fake ids
DAY = 86400.0


@dataclass(frozen=True, slots=True)
class PodArrival:
    """A pod the workload creates at `time` (seconds); it runs `runtime` once placed."""

    time: float
    runtime: float
    workload: str
    manifest: dict[str, Any]


def node_manifests(scenario: Scenario, vendor: Vendor = NVIDIA) -> list[dict[str, Any]]:
    """Kubernetes Node objects annotated the way the device plugin registers their cards."""
    manifests = []
    for pool in scenario.nodes:
        width = len(str(pool.count))
        for n in range(pool.count):
            name = f"{pool.name}-{n:0{width}d}"
            devices = [register_device(gpu, _sharing(pool)) for gpu in _gpus(pool, name)]
            manifests.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "annotations": {vendor.register_annotation: encode_node_devices(devices)},
                    },
                    "status": {
                        "allocatable": {vendor.count_resource: str(pool.gpus * pool.split_count)}
                    },
                }
            )
    return manifests


def cluster_nodes(scenario: Scenario, vendor: Vendor = NVIDIA) -> list[ClusterNode]:
    """The nodes as the scheduler reads them (register annotation decoded by the codec)."""
    return [node_from_manifest(m) for m in node_manifests(scenario, vendor)]


def _sharing(pool: NodePool) -> SharingConfig:
    return SharingConfig(pool.split_count, pool.memory_scaling, pool.core_scaling)


def _gpus(pool: NodePool, node: str) -> list[GpuInfo]:
    per_numa = math.ceil(pool.gpus / pool.numa_nodes)
    return [
        GpuInfo(
            uuid=f"GPU-{uuid.uuid5(_UUIDS, f'{node}/{i}')}",
            index=i,
            name=pool.model,
            memory_mib=pool.memory,
            numa=i // per_numa,
        )
        for i in range(pool.gpus)
    ]


def generate_pods(scenario: Scenario, seed: int, vendor: Vendor = NVIDIA) -> list[PodArrival]:
    """Every pod of every workload over the scenario's duration, in arrival order.

    Each workload draws from its own random stream (seeded by `seed` and its name), so adding a
    workload leaves the others' pods unchanged.
    """
    pods: list[PodArrival] = []
    for workload in scenario.workloads:
        rng = random.Random(f"{seed}/{workload.name}")
        times = _arrivals(workload, scenario.duration, rng)
        width = max(len(str(len(times))), 4)
        for n, time in enumerate(times):
            name = f"{workload.name}-{n:0{width}d}"
            pods.append(
                PodArrival(
                    time=time,
                    runtime=_runtime(workload.runtime, rng),
                    workload=workload.name,
                    manifest=_manifest(workload, name, rng, vendor),
                )
            )
    pods.sort(key=lambda p: (p.time, p.manifest["metadata"]["name"]))
    return pods


def _arrivals(workload: Workload, duration: float, rng: random.Random) -> list[float]:
    """A Poisson stream whose rate swings over the day around `arrivals_per_hour` (thinning)."""
    base = workload.arrivals_per_hour / 3600.0
    peak = base * (1.0 + workload.daily_swing)
    shift = workload.peak_hour * 3600.0

    def rate(t: float) -> float:
        return base * (1.0 + workload.daily_swing * math.cos(2 * math.pi * (t - shift) / DAY))

    times: list[float] = []
    t = workload.start
    while True:
        t += rng.expovariate(peak)
        if t >= duration:
            return times
        if rng.random() * peak <= rate(t):
            times.append(t)


def _runtime(runtime: Runtime, rng: random.Random) -> float:
    value: float
    cap: float | None = None
    if isinstance(runtime, FixedRuntime):
        value = runtime.value
    elif isinstance(runtime, UniformRuntime):
        value = rng.uniform(runtime.min, runtime.max)
    elif isinstance(runtime, ExponentialRuntime):
        value, cap = rng.expovariate(1.0 / runtime.mean), runtime.max
    else:
        assert isinstance(runtime, LognormalRuntime)
        value, cap = rng.lognormvariate(math.log(runtime.median), runtime.sigma), runtime.max
    if cap is not None:
        value = min(value, cap)
    return max(value, 1.0)


def draw(sample: Sample, rng: random.Random) -> int:
    """One value of a constant, `{min, max}` range or `{choices, weights}` field."""
    if isinstance(sample, Range):
        return rng.randint(sample.min, sample.max)
    if isinstance(sample, Choice):
        return rng.choices(sample.choices, weights=sample.weights)[0]
    return sample


def _manifest(workload: Workload, name: str, rng: random.Random, vendor: Vendor) -> dict[str, Any]:
    limits: dict[str, str] = {vendor.count_resource: str(draw(workload.gpus, rng))}
    resource_values: list[tuple[str, Sample | None]] = [
        (vendor.memory_resource, workload.memory),
        (vendor.memory_percentage_resource, workload.memory_percent),
        (vendor.cores_resource, workload.cores),
    ]
    for resource, sample in resource_values:
        if sample is not None:
            limits[resource] = str(draw(sample, rng))
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "simulated", "resources": {"limits": limits}}]
    }
    if workload.priority:
        spec["priority"] = workload.priority
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": workload.namespace,
            "uid": str(uuid.uuid5(_UUIDS, f"{workload.namespace}/{name}")),
            "labels": {"app": workload.name},
            "annotations": dict(workload.annotations),
        },
        "spec": spec,
    }
