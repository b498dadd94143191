"""The `resource.k8s.io/v1` values vgpu reads and writes, as plain immutable Python values.

Quantities are exact integers in the capacity's unit (bytes for `memory`, units for `cores`);
attribute and capacity names are kept as the object spells them (`memory` or
`gpu.vgpu.io/memory`). `read.py` builds these from the API's JSON and `write.py` turns them
back into it.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class AllocationMode(StrEnum):
    """How many devices a request wants: `ExactCount` (its `count`) or `All` that match."""

    EXACT_COUNT = "ExactCount"
    ALL = "All"


@dataclass(frozen=True, slots=True)
class Version:
    """A device attribute of type version: a semantic version such as `550.54.15`."""

    text: str


# semantic versioning 2.0: MAJOR.MINOR.PATCH, then -pre-release and +build
SEMVER = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?"
)


AttributeValue = int | bool | str | Version
"""A device attribute's value: one of the API's int, bool, string and version kinds."""


@dataclass(frozen=True, slots=True)
class ValidRange:
    """`requestPolicy.validRange`: a request below `min` consumes `min`, one above rounds up
    to `min + n * step`; above `max` the device cannot serve it."""

    min: int
    max: int | None = None
    step: int | None = None


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    """`requestPolicy` of a capacity: what a claim that asks nothing consumes (`default`),
    and the amounts a request is rounded up to (`valid_values`, ascending, or `valid_range`)."""

    default: int | None = None
    valid_values: tuple[int, ...] = ()
    valid_range: ValidRange | None = None


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    """One capacity of a device: its total `value` and how requests consume it."""

    value: int
    policy: RequestPolicy | None = None


@dataclass(frozen=True, slots=True)
class Device:
    """A device in a ResourceSlice. With `allow_multiple_allocations` many claims share it,
    each consuming part of its capacities; without, one claim takes it whole."""

    name: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    capacity: Mapping[str, DeviceCapacity] = field(default_factory=dict)
    allow_multiple_allocations: bool = False


@dataclass(frozen=True, slots=True)
class ResourcePool:
    """`spec.pool`: a pool is complete when `resource_slice_count` slices of its newest
    `generation` are published."""

    name: str
    generation: int = 1
    resource_slice_count: int = 1


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """A driver's devices on one node (`node_name`), or on every node (`all_nodes`)."""

    name: str
    driver: str
    pool: ResourcePool
    node_name: str | None = None
    devices: tuple[Device, ...] = ()
    all_nodes: bool = False


@dataclass(frozen=True, slots=True)
class ExactDeviceRequest:
    """`requests[].exactly`: devices of a class, narrowed by CEL `selectors`, and per device
    the capacities to consume (`capacity`, from `capacity.requests`)."""

    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: AllocationMode = AllocationMode.EXACT_COUNT
    count: int = 1
    admin_access: bool = False
    capacity: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeviceSubRequest:
    """One alternative of `requests[].firstAvailable`, tried in order."""

    name: str
    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: AllocationMode = AllocationMode.EXACT_COUNT
    count: int = 1
    capacity: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """A named request of a claim: `exactly` one kind of device, or the first of
    `first_available` that can be allocated."""

    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    """All devices of the named `requests` (every request when empty) have the same value of
    `match_attribute`, or pairwise different values of `distinct_attribute`."""

    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True, slots=True)
class DeviceRequestAllocationResult:
    """One allocated device: which request (`req` or `req/subreq`) got which device, the
    share's id on a shared device and what it consumes of every capacity of the device."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    share_id: str | None = None
    consumed_capacity: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AllocationResult:
    """`status.allocation`: the devices, and the node they tie the claim to (`node_name`,
    from the node selector the scheduler writes)."""

    results: tuple[DeviceRequestAllocationResult, ...] = ()
    node_name: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerReference:
    """`status.reservedFor[]`: who uses the claim (a pod, usually)."""

    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    """A ResourceClaim: what it asks (`requests`, `constraints`) and, once allocated, what it
    got (`allocation`) and who it is reserved for."""

    name: str
    namespace: str
    uid: str = ""
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    allocation: AllocationResult | None = None
    reserved_for: tuple[ConsumerReference, ...] = ()

    @property
    def key(self) -> str:
        """`namespace/name`."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """A DeviceClass: the CEL `selectors` every device of the class matches, and the extended
    resource (`nvidia.com/gpu`) a pod may ask for instead of writing a claim."""

    name: str
    selectors: tuple[str, ...] = ()
    extended_resource_name: str | None = None
