"""The openb trace in HAMi's terms: its cards as a device plugin registers them and its pods
as they ask for slices, so the scheduler can be put on the same cluster the replay uses.

A share of `m` milli asks `gpucores` and `gpumem-percentage` of `m / 10` (every openb share is
a multiple of 10, so this is exact; another trace's share is rounded up to a whole percent,
HAMi's unit, so it never asks less than its share); whole cards ask `nvidia.com/gpu: N` with
all the memory and 100 cores each (what the webhook gives whole-card pods); `gpu_spec` `A|B`
becomes `nvidia.com/use-gputype: A,B`. The smallest share is 50 milli, so cards are split 20
ways: HAMi's default of 10 would stop a card at 10 pods, which the trace does not.
"""

from typing import Any

from vgpu.domain import NVIDIA, Device
from vgpu.domain.fragmentation import MILLI, MilliNode, MilliPod, TypicalShape

SPLIT = 20
# MiB per card. V100M16, V100M32, P100, T4 and A10 are NVIDIA's sizes; G2 and G3 are
# undisclosed, and these are the paper's artifact's own figures for them.
CARD_MEMORY = {
    "A10": 24576,
    "P100": 16384,
    "T4": 16384,
    "V100M16": 16384,
    "V100M32": 32768,
    "G2": 20000,
    "G3": 30000,
}
# A model the table does not know (a user's trace): every request asks a share of the card's
# memory, never MiB, so the size decides nothing and any will do.
OTHER_MEMORY = 16384


def hami_devices(name: str, node: MilliNode) -> tuple[Device, ...]:
    """The node's cards as its device plugin would register them (all free)."""
    memory = CARD_MEMORY.get(node.model, OTHER_MEMORY)
    return tuple(
        Device(f"GPU-{name}-{i}", i, f"NVIDIA {node.model}", SPLIT, memory, 100)
        for i in range(len(node.free))
    )


def hami_manifest(name: str, pod: MilliPod, annotations: dict[str, str]) -> dict[str, Any]:
    """The pod as created (after the webhook), with `annotations` (e.g. its policies) added;
    its CPU and host memory are requests.

    >>> main = hami_manifest("p", MilliPod(2000, 1024, 1, 460), {})["spec"]["containers"][0]
    >>> main["resources"]["limits"]
    {'nvidia.com/gpu': '1', 'nvidia.com/gpucores': '46', 'nvidia.com/gpumem-percentage': '46'}
    >>> main["resources"]["requests"]
    {'cpu': '2000m', 'memory': '1024Mi'}
    """
    if pod.milli >= MILLI:
        limits = {NVIDIA.count_resource: pod.gpus, NVIDIA.cores_resource: 100}
    else:
        percent = _percent(pod.milli)
        limits = {
            NVIDIA.count_resource: pod.gpus,
            NVIDIA.cores_resource: percent,
            NVIDIA.memory_percentage_resource: percent,
        }
    notes = dict(annotations)
    if pod.models:
        notes[NVIDIA.use_type_annotation] = ",".join(sorted(pod.models))
    resources: dict[str, dict[str, str]] = {"limits": {k: str(v) for k, v in limits.items()}}
    if pod.cpu or pod.memory:
        resources["requests"] = {"cpu": f"{pod.cpu}m", "memory": f"{pod.memory}Mi"}
    return {
        "metadata": {"name": name, "namespace": "trace", "annotations": notes},
        "spec": {"containers": [{"name": "main", "resources": resources}]},
    }


def hami_shape(shape: TypicalShape) -> dict[str, Any]:
    """A typical shape as an item of the scheduler's `fragmentation.typical_shapes`, in the
    terms `hami_manifest` asks for pods (no cards: a CPU-only pod).

    >>> shape = TypicalShape(7, 1, 465, cpu=3152, models=frozenset({"T4"}), memory=8192)
    >>> hami_shape(shape)  # doctest: +NORMALIZE_WHITESPACE
    {'gpus': 1, 'memory_percent': 47, 'cores': 47, 'cpu': '3152m', 'host_memory': '8192Mi',
     'weight': 7, 'gputype': 'T4'}
    """
    percent = _percent(shape.milli) if shape.gpus else 0
    item: dict[str, Any] = {
        "gpus": shape.gpus,
        "memory_percent": max(percent, 1),
        "cores": percent,
        "cpu": f"{shape.cpu}m",
        "host_memory": f"{shape.memory}Mi",
        "weight": shape.count,
    }
    if shape.models:
        item["gputype"] = ",".join(sorted(shape.models))
    return item


def _percent(milli: int) -> int:
    """A card's share in HAMi's whole percent, never less than `milli` asks."""
    return min(-(-milli // 10), 100)

