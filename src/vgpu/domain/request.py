"""What one container asks for, parsed from its resource limits with the configured defaults."""

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from vgpu.domain.device import Device
from vgpu.domain.errors import RequestError
from vgpu.domain.pod import Container
from vgpu.domain.quantity import memory_mib, parse_quantity
from vgpu.domain.vendor import Vendor

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class RequestDefaults:
    """HAMi's device-config defaults (chart values in brackets)."""

    gpu_count: int = 1  # defaultGPUNum [1]: when only memory or cores are given
    memory: int = 0  # defaultMemory [0]: MiB; 0 means 100 % of the card
    cores: int = 0  # defaultCores [0]
    memory_factor: int = 1  # memoryFactor [1]: gpumem is multiplied by this


@dataclass(frozen=True, slots=True)
class ContainerRequest:
    """Slices one container needs: `count` cards, each with this memory and cores.

    Memory is absolute (`memory` MiB) when positive, else `memory_percent` of each chosen card.
    """

    count: int
    memory: int = 0
    memory_percent: int = 100
    cores: int = 0
    priority: int | None = None

    def memory_on(self, device: Device) -> int:
        """MiB this request takes on `device` (percentages resolve per card)."""
        if self.memory > 0:
            return self.memory
        return device.memory * self.memory_percent // 100

    def describe_memory(self) -> str:
        """The memory asked per card, in words: `20000 MiB` or `25% of a card`."""
        return f"{self.memory} MiB" if self.memory > 0 else f"{self.memory_percent}% of a card"


def parse_request(
    container: Container,
    vendor: Vendor,
    defaults: RequestDefaults = RequestDefaults(),
) -> ContainerRequest | None:
    """The container's GPU request, or None when it asks for no GPU of this vendor.

    Raises RequestError naming the container, resource and value for anything invalid.
    """
    values = request_values(container)
    name = container.name
    given = {r: values[r] for r in vendor.resources if r in values}
    count = _integer(name, vendor.count_resource, values.get(vendor.count_resource), 0, 1 << 16)
    if vendor.count_resource not in given:
        if not given:
            return None
        count = defaults.gpu_count
    if count == 0:
        return None
    memory = _memory(name, vendor.memory_resource, values.get(vendor.memory_resource))
    memory *= defaults.memory_factor
    if memory > _INT32_MAX:
        raise RequestError(
            name,
            vendor.memory_resource,
            values[vendor.memory_resource],
            f"is {memory} MiB after the memory factor, above the limit of {_INT32_MAX}",
        )
    percent = _integer(
        name,
        vendor.memory_percentage_resource,
        values.get(vendor.memory_percentage_resource),
        0,
        100,
    )
    if memory == 0 and percent == 0:
        memory = defaults.memory
        percent = 0 if memory > 0 else 100
    cores = _integer(name, vendor.cores_resource, values.get(vendor.cores_resource), 0, 100)
    if vendor.cores_resource not in values:
        cores = defaults.cores
    priority_raw = values.get(vendor.priority_resource)
    priority = (
        None
        if priority_raw is None
        else _integer(name, vendor.priority_resource, priority_raw, 0, _INT32_MAX)
    )
    return ContainerRequest(
        count=count,
        memory=memory,
        memory_percent=percent if memory == 0 else 0,
        cores=cores,
        priority=priority,
    )


def asks_for_gpu(container: Container, vendor: Vendor) -> bool:
    """True when the container names any of the vendor's resources (even with a bad value)."""
    return any(r in container.limits or r in container.requests for r in vendor.resources)


def _integer(container: str, resource: str, raw: Any, low: int, high: int) -> int:
    if raw is None:
        return 0
    value = _quantity(container, resource, raw)
    if value != value.to_integral_value():
        raise RequestError(container, resource, raw, "must be a whole number")
    if not low <= value <= high:
        raise RequestError(container, resource, raw, f"must be between {low} and {high}")
    return int(value)


def _memory(container: str, resource: str, raw: Any) -> int:
    if raw is None:
        return 0
    try:
        value = memory_mib(raw)
    except ValueError as exc:
        raise RequestError(container, resource, raw, str(exc)) from exc
    if value < 0:
        raise RequestError(container, resource, raw, "must not be negative")
    if value != value.to_integral_value():
        raise RequestError(container, resource, raw, "is not a whole number of MiB")
    if value > _INT32_MAX:
        raise RequestError(container, resource, raw, f"is above the limit of {_INT32_MAX} MiB")
    return int(value)


def _quantity(container: str, resource: str, raw: Any) -> Decimal:
    try:
        return parse_quantity(raw)
    except ValueError as exc:
        raise RequestError(container, resource, raw, str(exc)) from exc


def container_requests(
    containers: tuple[Container, ...] | list[Container],
    vendor: Vendor,
    defaults: RequestDefaults = RequestDefaults(),
) -> tuple[ContainerRequest | None, ...]:
    """One entry per container (init first), None where a container asks for no GPU."""
    return tuple(parse_request(c, vendor, defaults) for c in containers)


def request_values(container: Container) -> Mapping[str, Any]:
    """The effective resource values of a container: limits win over requests, as in HAMi."""
    return {**container.requests, **container.limits}
