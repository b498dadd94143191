"""A node's CPU and host memory, and what a pod asks of them, as kube-scheduler counts them.

FGD (`vgpu.domain.fragmentation`) needs both: a typical pod shape fits a node only when the
node's free CPU covers the shape's, so a node about to run out of CPU strands the GPU it has
left. kube-scheduler's resource filter keeps its own count and runs before the extender's; the
scheduler's count here only feeds FGD's score.

A pod's request per resource is kube-scheduler's: the app containers' sum plus the sidecars'
(init containers that keep running), or the largest init container's (with the sidecars
started before it) when that is more. A container's request is its `requests` entry, else its
`limits` entry (the API server copies limits into absent requests). CPU is counted in
milli-cores and memory in MiB, both rounded up.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from vgpu.domain.errors import DomainError, RequestError
from vgpu.domain.pod import Container, Pod
from vgpu.domain.quantity import parse_quantity

CPU = "cpu"
MEMORY = "memory"
_PER_CORE = Decimal(1000)  # milli-cores per core
_PER_BYTE = Decimal(1) / (1 << 20)  # MiB per byte (exact: a power of two)
_BOUND = 1 << 62  # milli-cores or MiB beyond any real node: refused as absurd


@dataclass(frozen=True, slots=True)
class HostResources:
    """CPU in milli-cores and host memory in MiB: what a pod asks for, or what a node has."""

    cpu: int = 0
    memory: int = 0

    def __add__(self, other: "HostResources") -> "HostResources":
        return HostResources(self.cpu + other.cpu, self.memory + other.memory)

    def __sub__(self, other: "HostResources") -> "HostResources":
        return HostResources(self.cpu - other.cpu, self.memory - other.memory)


NOTHING = HostResources()


def pod_host_request(pod: Pod) -> HostResources:
    """What the pod asks of its node's CPU and memory. RequestError names the container, the
    resource and the value of a request that is not a quantity.

    >>> app = Container("main", requests={"cpu": "1500m", "memory": "1Gi"})
    >>> init = Container("setup", limits={"cpu": "4", "memory": "100Mi"}, is_init=True)
    >>> pod_host_request(Pod("ns", "p", containers=(init, app)))
    HostResources(cpu=4000, memory=1024)
    """
    sidecars = pod.init_progress.sidecars
    running = NOTHING  # the sidecars started so far
    peak = NOTHING  # the largest init container, with the sidecars before it
    position = 0
    app = NOTHING
    for container in pod.containers:
        asked = container_host_request(container)
        if not container.is_init:
            app = app + asked
            continue
        if position in sidecars:
            running = running + asked
        else:
            peak = _larger(peak, running + asked)
        position += 1
    return _larger(app + running, peak)


def container_host_request(container: Container) -> HostResources:
    """One container's CPU and memory request (limits where requests are absent)."""
    return HostResources(_amount(container, CPU, _PER_CORE), _amount(container, MEMORY, _PER_BYTE))


def node_allocatable(allocatable: Mapping[str, Any]) -> HostResources | None:
    """A node's allocatable CPU and memory (`status.allocatable`), or None when it gives
    neither. DomainError names the resource and the value of one that is not a quantity.

    >>> node_allocatable({"cpu": "95500m", "memory": "384Gi", "pods": "110"})
    HostResources(cpu=95500, memory=393216)
    >>> node_allocatable({}) is None
    True
    """
    if CPU not in allocatable and MEMORY not in allocatable:
        return None
    amounts = []
    for resource, scale in ((CPU, _PER_CORE), (MEMORY, _PER_BYTE)):
        raw = allocatable.get(resource, 0)
        try:
            amounts.append(_scaled(raw, scale))
        except ValueError as exc:
            raise DomainError(f"node status.allocatable.{resource}={raw!r} {exc}") from None
    return HostResources(amounts[0], amounts[1])


def milli_cores(raw: Any) -> int:
    """A CPU quantity (`3152m`, `4`, `"0.5"`) in milli-cores, rounded up; ValueError says why
    it is not one.

    >>> milli_cores("3152m"), milli_cores(4), milli_cores("0.0005")
    (3152, 4000, 1)
    """
    if isinstance(raw, bool) or not isinstance(raw, int | float | str | Decimal):
        raise ValueError("is not a CPU quantity")
    return _scaled(raw, _PER_CORE)


def mebibytes(raw: Any) -> int:
    """A memory quantity (`16Gi`, `3152Mi`, `"1e9"`; a bare number counts bytes, as in a pod)
    in MiB, rounded up; ValueError says why it is not one.

    >>> mebibytes("16Gi"), mebibytes("3152Mi"), mebibytes(1)
    (16384, 3152, 1)
    """
    if isinstance(raw, bool) or not isinstance(raw, int | float | str | Decimal):
        raise ValueError("is not a memory quantity")
    return _scaled(raw, _PER_BYTE)


def _amount(container: Container, resource: str, scale: Decimal) -> int:
    raw = container.requests.get(resource)
    if raw is None:
        raw = container.limits.get(resource)
    if raw is None:
        return 0
    try:
        return _scaled(raw, scale)
    except ValueError as exc:
        raise RequestError(container.name, resource, raw, str(exc)) from None


def _scaled(raw: Any, scale: Decimal) -> int:
    """The quantity times `scale`, rounded up; ValueError for a negative or absurd one."""
    value = parse_quantity(raw if isinstance(raw, int) else str(raw))
    if value < 0:
        raise ValueError("must not be negative")
    scaled = math.ceil(value * scale)
    if scaled >= _BOUND:
        raise ValueError("is out of range")
    return scaled


def _larger(a: HostResources, b: HostResources) -> HostResources:
    return HostResources(max(a.cpu, b.cpu), max(a.memory, b.memory))
