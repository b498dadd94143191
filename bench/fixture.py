"""Shared by the benchmarks: a cluster of a given size with running pods, incoming pods, stats.

The cluster is A100-80GB cards split 10 ways; running pods are small one-card slices placed at
random where they fit, so every size is reproducible from its seed.
"""

import json
import math
import os
import platform
import random
import statistics
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vgpu.domain import (
    NVIDIA,
    Device,
    DeviceGrant,
    PodGrants,
    PodPlan,
    SchedulingConfig,
    decode_node_devices,
    encode_node_devices,
    encode_pod_grants,
    plan_pod,
    pod_from_manifest,
)

CARD_MEMORY = 81920
SPLIT = 10
NAMESPACES = ("inference", "research", "training")
_IDS = uuid.UUID("0b6c9d0e-3f1a-4c2b-8d7e-9a1b2c3d4e5f")


@dataclass(frozen=True, slots=True)
class Size:
    nodes: int
    gpus: int
    pods: int
    calls: int  # filter calls sampled at this size

    @property
    def label(self) -> str:
        return f"{self.nodes} x {self.gpus}, {self.pods:,} pods"


FULL = (
    Size(50, 8, 1_000, 300),
    Size(100, 16, 5_000, 100),
    Size(1_000, 8, 20_000, 20),
    Size(5_000, 8, 50_000, 10),
)
QUICK = (Size(20, 4, 200, 100), Size(50, 8, 1_000, 60))


@dataclass(frozen=True, slots=True)
class RunningPod:
    """A pod already placed: its node, namespace, grants and their annotation text."""

    key: str
    namespace: str
    node: str
    grants: PodGrants
    annotation: str


@dataclass(frozen=True, slots=True)
class Cluster:
    """Node cards (as decoded from the register annotation) and the pods running on them."""

    devices: dict[str, list[Device]]
    running: list[RunningPod]


def build_cluster(size: Size, seed: int = 1) -> Cluster:
    """`size.nodes` nodes of `size.gpus` cards with `size.pods` running pods placed at random."""
    rng = random.Random(seed)
    devices: dict[str, list[Device]] = {}
    for n in range(size.nodes):
        node = f"node-{n:05d}"
        cards = [
            Device(
                uuid=f"GPU-{uuid.uuid5(_IDS, f'{node}/{i}')}",
                index=i,
                type="NVIDIA A100-SXM4-80GB",
                count=SPLIT,
                memory=CARD_MEMORY,
                cores=100,
                numa=i * 2 // size.gpus,
            )
            for i in range(size.gpus)
        ]
        devices[node] = decode_node_devices(encode_node_devices(cards))
    names = list(devices)
    used: dict[str, list[int]] = {}  # uuid -> [slices, memory, cores]
    running = []
    for p in range(size.pods):
        memory = rng.randint(2, 12) * 1024
        cores = rng.choice((5, 10, 15, 20))
        for _ in range(1000):
            node = rng.choice(names)
            card = rng.choice(devices[node])
            taken = used.setdefault(card.uuid, [0, 0, 0])
            if (
                taken[0] < card.count
                and taken[1] + memory <= card.memory
                and taken[2] + cores <= 100
            ):
                break
        else:
            raise SystemExit(f"{size.label}: could not place running pod {p}; cluster too small")
        taken[0] += 1
        taken[1] += memory
        taken[2] += cores
        grants: PodGrants = ((DeviceGrant(card.uuid, NVIDIA.word, memory, cores),),)
        namespace = NAMESPACES[p % len(NAMESPACES)]
        running.append(
            RunningPod(
                f"{namespace}/run-{p:06d}", namespace, node, grants, encode_pod_grants(grants)
            )
        )
    return Cluster(devices, running)


def incoming_plans(count: int, seed: int = 2) -> list[PodPlan]:
    """Pods to filter: mostly one-card inference slices, some two-card medium pods."""
    rng = random.Random(seed)
    config = SchedulingConfig()
    plans = []
    for i in range(count):
        if rng.random() < 0.8:
            limits = {
                "nvidia.com/gpu": "1",
                "nvidia.com/gpumem": str(rng.randint(4, 20) * 1024),
                "nvidia.com/gpucores": str(rng.randint(10, 30)),
            }
        else:
            limits = {
                "nvidia.com/gpu": "2",
                "nvidia.com/gpumem": str(rng.choice((24, 32, 40)) * 1024),
                "nvidia.com/gpucores": str(rng.randint(30, 50)),
            }
        manifest = {
            "metadata": {"name": f"new-{i:05d}", "namespace": NAMESPACES[i % len(NAMESPACES)]},
            "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]},
        }
        plan = plan_pod(pod_from_manifest(manifest), config)
        assert plan is not None
        plans.append(plan)
    return plans


def quota_limits(size: Size) -> dict[str, str]:
    """A generous ResourceQuota `spec.hard` per namespace: checked on every call, never binding."""
    cards = size.nodes * size.gpus
    return {
        f"limits.{NVIDIA.memory_resource}": str(cards * CARD_MEMORY),
        f"limits.{NVIDIA.cores_resource}": str(cards * 100),
    }


def stats_ms(seconds: Sequence[float]) -> dict[str, float]:
    """Median, p99 (nearest rank) and mean in milliseconds, and calls per second."""
    ordered = sorted(seconds)
    p99 = ordered[max(math.ceil(0.99 * len(ordered)), 1) - 1]
    mean = statistics.fmean(ordered)
    return {
        "median_ms": statistics.median(ordered) * 1e3,
        "p99_ms": p99 * 1e3,
        "mean_ms": mean * 1e3,
        "per_second": 1.0 / mean if mean > 0 else 0.0,
    }


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model or platform.processor(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "system": f"{platform.system()} {platform.release()}",
    }


# Where a benchmark writes its figures unless told otherwise: out/ at the repository's root,
# which git ignores, so a run never rewrites a tracked file.
RESULTS = Path(__file__).resolve().parents[1] / "out" / "bench"


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
