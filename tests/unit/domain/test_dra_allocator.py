"""The allocator against kube-scheduler's own test table.

Each case is one of `TestAllocator`'s cases in kubernetes/kubernetes
staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/
allocator_testing.go, under the same name, with the same slices, classes, claims and what is
already allocated, and the same expected results (share ids are checked for presence only: Go
uses a fixed one in its tests). `withCapacityRequestPolicyRange` there is `_ranged` here
(default 2, range 2..4 step 2), `withCapacityRequestPolicyValidValues` is `_valued`.
Allocated devices and capacities are given as allocated claims (what the Go test puts in
`allocatedDevices` / `allocatedCapacityDevices` directly).
"""

import doctest
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pytest

from vgpu.domain.dra import (
    AllocationMode,
    AllocationResult,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    ExactDeviceRequest,
    GpuCard,
    RequestPolicy,
    ResourceClaim,
    ResourcePool,
    ResourceSlice,
    ValidRange,
    Version,
    gpu_device,
    node_slice,
)
from vgpu.domain.dra import capacity as capacity_module
from vgpu.domain.dra.allocated import AllocatedDevices, DeviceId
from vgpu.domain.dra.allocator import Allocator, allocate
from vgpu.domain.dra.outcome import Allocation, CannotAllocate, DeviceProblem

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
CLASS_A, CLASS_B = "class-a", "class-b"
NODE_1, NODE_2 = "node-1", "node-2"
POOL_1, POOL_2 = "pool-1", "pool-2"
CAP_0, CAP_1 = "capacity-0", "capacity-1"
GI = 2**30


def _class(name: str = CLASS_A, driver: str = DRIVER_A, multi: bool | None = None) -> DeviceClass:
    expression = f'device.driver == "{driver}"'
    if multi is not None:  # classWithAllowMultipleAllocations
        expression += f" && device.allowMultipleAllocations == {str(multi).lower()}"
    return DeviceClass(name, (expression,))


def _device(
    name: str,
    capacity: dict[str, int | DeviceCapacity] | None = None,
    attributes: dict[str, object] | None = None,
    multi: bool = False,
) -> Device:
    return Device(
        name,
        attributes=dict(attributes or {}),  # type: ignore[arg-type]
        capacity={
            k: v if isinstance(v, DeviceCapacity) else DeviceCapacity(v)
            for k, v in (capacity or {}).items()
        },
        allow_multiple_allocations=multi,
    )


def _ranged(value: int) -> DeviceCapacity:
    return DeviceCapacity(value, RequestPolicy(default=2, valid_range=ValidRange(2, 4, 2)))


def _valued(default: int, value: int, *more: int) -> DeviceCapacity:
    return DeviceCapacity(value, RequestPolicy(default=default, valid_values=(default, *more)))


def _slice(
    name: str,
    node: str | None,
    pool: str,
    driver: str,
    *devices: Device,
    count: int = 1,
    generation: int = 1,
) -> ResourceSlice:
    return ResourceSlice(
        name, driver, ResourcePool(pool, generation, count), node, tuple(devices), node is None
    )


def _request(
    name: str,
    count: int = 1,
    device_class: str = CLASS_A,
    selectors: tuple[str, ...] = (),
    capacity: int | None = None,
    mode: AllocationMode = AllocationMode.EXACT_COUNT,
    admin: bool = False,
) -> DeviceRequest:
    requested = {} if capacity is None else {CAP_0: capacity}
    return DeviceRequest(
        name,
        exactly=ExactDeviceRequest(device_class, selectors, mode, count, admin, requested),
    )


def _sub(
    name: str, capacity: int | None = None, selectors: tuple[str, ...] = ()
) -> DeviceSubRequest:
    requested = {} if capacity is None else {CAP_0: capacity}
    return DeviceSubRequest(name, CLASS_A, selectors, capacity=requested)


def _claim(
    name: str, *requests: DeviceRequest, constraints: tuple[DeviceConstraint, ...] = ()
) -> ResourceClaim:
    return ResourceClaim(name, "default", f"uid-{name}", requests, constraints)


def _held(device: str, consumed: dict[str, int] | None = None, pool: str = POOL_1) -> ResourceClaim:
    """A claim allocated elsewhere that holds `device` whole, or a share of it (`consumed`)."""
    result = DeviceRequestAllocationResult(
        "req", DRIVER_A, pool, device, False, None if consumed is None else "held", consumed or {}
    )
    return ResourceClaim(f"holder-{device}", "other", "", allocation=AllocationResult((result,)))


Expected = tuple[tuple[str, str, str, str, bool, bool, dict[str, int]], ...]


def _got(
    request: str,
    device: str,
    pool: str = POOL_1,
    driver: str = DRIVER_A,
    shared: bool = False,
    consumed: dict[str, int] | None = None,
    admin: bool = False,
) -> tuple[str, str, str, str, bool, bool, dict[str, int]]:
    return (request, driver, pool, device, admin, shared, consumed or {})


def _shared(
    request: str, device: str, consumed: dict[str, int] | None = None
) -> tuple[str, str, str, str, bool, bool, dict[str, int]]:
    return _got(request, device, shared=True, consumed=consumed)


@dataclass
class Case:
    name: str
    claims: Sequence[ResourceClaim]
    slices: Sequence[ResourceSlice]
    expect: Sequence[Expected] | None = None  # None: no allocation (and no error)
    error: str = ""
    classes: Sequence[DeviceClass] = field(default_factory=lambda: [_class()])
    allocated: Sequence[ResourceClaim] = ()
    node: str = NODE_1


def _memory_at_least(size: str) -> str:
    return f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{size}")) >= 0'


SMALL_LARGE = (
    _request("req-0", selectors=(_memory_at_least("1Gi"),)),
    _request("req-1", selectors=(_memory_at_least("2Gi"),)),
)
ONE_DEVICE = _slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1"))
STRING = f"{DRIVER_A}/stringAttribute"
BOOL, VERSION, INT = f"{DRIVER_A}/boolAttribute", f"{DRIVER_A}/driverVersion", f"{DRIVER_A}/numa"
MULTI_A = [_class(multi=True)]

CASES = [
    Case(
        "simple",
        [_claim("claim-0", _request("req-0"))],
        [ONE_DEVICE],
        [(_got("req-0", "device-1"),)],
    ),
    Case(
        "other-node",
        [_claim("claim-0", _request("req-0"))],
        [
            _slice("slice-1", NODE_1, POOL_1, DRIVER_B, _device("device-1")),
            _slice("slice-2", NODE_2, POOL_2, DRIVER_A, _device("device-1")),
        ],
        [(_got("req-0", "device-1", POOL_2),)],
        node=NODE_2,
    ),
    Case(
        "small-and-large",
        [_claim("claim-0", *SMALL_LARGE)],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {"memory": GI}),
                _device("device-2", {"memory": 2 * GI}),
            )
        ],
        [(_got("req-0", "device-1"), _got("req-1", "device-2"))],
    ),
    Case(
        "small-and-large-backtrack-requests",
        [_claim("claim-0", *SMALL_LARGE)],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-2", {"memory": 2 * GI}),
                _device("device-1", {"memory": GI}),
            )
        ],
        [(_got("req-0", "device-1"), _got("req-1", "device-2"))],
    ),
    Case(
        "small-and-large-backtrack-claims",
        [_claim("claim-0", SMALL_LARGE[0]), _claim("claim-1", SMALL_LARGE[1])],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-2", {"memory": 2 * GI}),
                _device("device-1", {"memory": GI}),
            )
        ],
        [(_got("req-0", "device-1"),), (_got("req-1", "device-2"),)],
    ),
    Case(
        "devices-split-across-different-slices",
        [_claim("claim-0", _request("req-0", count=2))],
        [
            _slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1")),
            _slice("slice-2", NODE_1, POOL_2, DRIVER_A, _device("device-1")),
        ],
        [(_got("req-0", "device-1"), _got("req-0", "device-1", POOL_2))],
    ),
    Case(
        "obsolete-slice",
        [_claim("claim-0", _request("req-0"))],
        [
            _slice("slice-1-obsolete", NODE_1, POOL_1, DRIVER_A, _device("device-1"), count=2),
            _slice(
                "slice-1-obsolete",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-2"),
                count=2,
                generation=2,
            ),
        ],
    ),
    Case(
        "duplicate-slice",
        [_claim("claim-0", _request("req-0"))],
        [
            _slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1"), count=2),
            _slice("slice-1-2", NODE_1, POOL_1, DRIVER_A, _device("device-1"), count=2),
        ],
        error="invalid resource pools were encountered",
    ),
    Case("no-slices", [_claim("claim-0", _request("req-0"))], []),
    Case(
        "not-enough-suitable-devices",
        [_claim("claim-0", _request("req-0")), _claim("claim-0", _request("req-1"))],
        [ONE_DEVICE],
    ),
    Case(
        "no-classes",
        [_claim("claim-0", _request("req-0"))],
        [ONE_DEVICE],
        classes=[],
        error="could not retrieve device class class-a",
    ),
    Case(
        "unknown-class",
        [_claim("claim-0", _request("req-0", device_class="unknown-class"))],
        [ONE_DEVICE],
        error="could not retrieve device class unknown-class",
    ),
    Case(
        "empty-class",
        [_claim("claim-0", _request("req-0", device_class=""))],
        [ONE_DEVICE],
        error="claim default/claim-0, request req-0: missing device class name",
    ),
    Case(
        "all-devices-single",
        [_claim("claim-0", _request("req-0", mode=AllocationMode.ALL))],
        [ONE_DEVICE],
        [(_got("req-0", "device-1"),)],
    ),
    Case(
        "all-devices-many",
        [_claim("claim-0", _request("req-0", mode=AllocationMode.ALL))],
        [
            _slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1")),
            _slice("slice-1", NODE_1, POOL_2, DRIVER_A, _device("device-1")),
        ],
        [(_got("req-0", "device-1"), _got("req-0", "device-1", POOL_2))],
    ),
    Case(
        "all-devices-of-the-incomplete-pool",
        [_claim("claim-0", _request("req-0", mode=AllocationMode.ALL))],
        [_slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1"), count=2)],
        error="claim default/claim-0, request req-0: asks for all devices, but resource pool "
        "driver-a/pool-1 is currently being updated",
    ),
    Case(
        "all-devices-plus-another",
        [
            _claim("claim-0", _request("req-0", mode=AllocationMode.ALL)),
            _claim("claim-1", _request("req-0", device_class=CLASS_B)),
        ],
        [
            _slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1")),
            _slice("slice-1", NODE_1, POOL_1, DRIVER_B, _device("device-1")),
        ],
        [(_got("req-0", "device-1"),), (_got("req-0", "device-1", driver=DRIVER_B),)],
        classes=[_class(), _class(CLASS_B, DRIVER_B)],
    ),
    Case(
        "admin-access-enabled",
        [
            _claim("claim-0", _request("req-0", admin=True)),
            _claim("claim-1", _request("req-0", admin=True)),
        ],
        [ONE_DEVICE],
        [(_got("req-0", "device-1", admin=True),), (_got("req-0", "device-1", admin=True),)],
        allocated=[_held("device-1")],
    ),
    Case(
        "with-constraint",
        [
            _claim(
                "claim-0",
                _request("req-0"),
                _request("req-1"),
                constraints=(DeviceConstraint(match_attribute=INT),),
            )
        ],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", attributes={"numa": 1}),
                _device("device-2", attributes={"numa": 2}),
                _device("device-3", attributes={"numa": 1}),
            )
        ],
        [(_got("req-0", "device-1"), _got("req-1", "device-3"))],
    ),
    Case(
        "with-constraint-non-existent-attribute",
        [
            _claim(
                "claim-0",
                _request("req-0"),
                constraints=(DeviceConstraint(match_attribute=f"{DRIVER_A}/NonExistentAttribute"),),
            )
        ],
        [ONE_DEVICE],
    ),
    Case(
        "with-constraint-not-matching-version-attribute",
        [
            _claim(
                "claim-0",
                _request("req-0", count=2),
                constraints=(DeviceConstraint(match_attribute=VERSION),),
            )
        ],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", attributes={"driverVersion": Version("1.0.0")}),
                _device("device-2", attributes={"driverVersion": Version("2.0.0")}),
            )
        ],
    ),
    # consumable capacity (KEP-5075)
    Case(
        "consumable-capacity-multi-allocatable-device-with-missing-capacity-request",
        [_claim("claim-0", _request("req-0", capacity=1))],
        [_slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1", {CAP_1: 1}, multi=True))],
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request",
        [_claim("claim-0", _request("req-0", capacity=1, mode=AllocationMode.ALL))],
        [_slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1", {CAP_1: 1}, multi=True))],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request",
        [_claim("claim-0", _request("req-0")), _claim("claim-1", _request("req-0"))],
        [_slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1", multi=True))],
        [(_shared("req-0", "device-1"),), (_shared("req-0", "device-1"),)],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request",
        [_claim("claim-0", _request("req-0")), _claim("claim-1", _request("req-0"))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: 1}, multi=True),
                _device("device-2", {CAP_0: 1}, multi=True),
            )
        ],
        [
            (_shared("req-0", "device-1", {CAP_0: 1}),),
            (_got("req-0", "device-2", shared=True, consumed={CAP_0: 1}),),
        ],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block",
        [_claim("claim-0", _request("req-0")), _claim("claim-1", _request("req-0"))],
        [_slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1", {CAP_0: 2}, multi=True))],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request",
        [
            _claim("claim-0", _request("req-0", capacity=1)),
            _claim("claim-1", _request("req-0", capacity=1)),
        ],
        [_slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1", {CAP_0: 2}, multi=True))],
        [(_shared("req-0", "device-1", {CAP_0: 1}),), (_shared("req-0", "device-1", {CAP_0: 1}),)],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request",
        [_claim("claim-0", _request("req-0")), _claim("claim-1", _request("req-0"))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: _ranged(4)}, multi=True),
            )
        ],
        [(_shared("req-0", "device-1", {CAP_0: 2}),), (_shared("req-0", "device-1", {CAP_0: 2}),)],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-with-zero-request-policy",
        [_claim("claim-0", _request("req-0")), _claim("claim-1", _request("req-0"))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: _valued(0, 1)}, multi=True),
            )
        ],
        [(_shared("req-0", "device-1", {CAP_0: 0}),), (_shared("req-0", "device-1", {CAP_0: 0}),)],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-violates-zero-request-policy",
        [_claim("claim-0", _request("req-0", capacity=1))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: _valued(0, 1)}, multi=True),
            )
        ],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request",
        [
            _claim("claim-0", _request("req-0", capacity=1)),
            _claim("claim-1", _request("req-0", capacity=1)),
        ],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: _ranged(4)}, multi=True),
            )
        ],
        [(_shared("req-0", "device-1", {CAP_0: 2}),), (_shared("req-0", "device-1", {CAP_0: 2}),)],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-with-range-policy-step",
        [_claim("claim-0", _request("req-0", capacity=3))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: _ranged(4)}, multi=True),
            )
        ],
        [(_shared("req-0", "device-1", {CAP_0: 4}),)],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-with-valid-values-policy",
        [_claim("claim-0", _request("req-0", capacity=2))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: _valued(1, 4, 2)}, multi=True),
            )
        ],
        [(_shared("req-0", "device-1", {CAP_0: 2}),)],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up",
        [_claim("claim-0", _request("req-0", capacity=2))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: _valued(1, 3, 3)}, multi=True),
            )
        ],
        [(_shared("req-0", "device-1", {CAP_0: 3}),)],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request",
        [
            _claim("claim-0", _request("req-0", capacity=1)),
            _claim("claim-1", _request("req-0", capacity=2)),
        ],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: _ranged(2)}, multi=True),
            )
        ],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy",
        [_claim("claim-0", _request("req-0", capacity=6))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: _ranged(10)}, multi=True),
            )
        ],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining",
        [_claim("claim-0", _request("req-0", capacity=2))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: _ranged(4)}, multi=True),
            )
        ],
        [(_shared("req-0", "device-1", {CAP_0: 2}),)],
        classes=MULTI_A,
        allocated=[_held("device-1", {CAP_0: 2})],
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device",
        [_claim("claim-0", _request("req-0", capacity=2))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: _ranged(2)}, multi=True),
                _device("device-2", {CAP_0: _ranged(2)}, multi=True),
            )
        ],
        [(_shared("req-0", "device-2", {CAP_0: 2}),)],
        classes=MULTI_A,
        allocated=[_held("device-1", {CAP_0: 2})],
    ),
    Case(
        "consumable-capacity-with-multi-allocatable-device-backtrack",
        [
            _claim(
                "claim-0",
                _request("req-0", capacity=2),
                _request("req-1", capacity=2),
                constraints=(DeviceConstraint(match_attribute=STRING),),
            ),
            _claim("claim-1", _request("req-0", capacity=2)),
        ],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device(
                    "device-2",
                    {CAP_0: _ranged(2)},
                    {"stringAttribute": "stringAttributeValue1"},
                    True,
                ),
                _device(
                    "device-1",
                    {CAP_0: _ranged(4)},
                    {"stringAttribute": "stringAttributeValue2"},
                    True,
                ),
            )
        ],
        [
            (_shared("req-0", "device-1", {CAP_0: 2}), _shared("req-1", "device-1", {CAP_0: 2})),
            (_shared("req-0", "device-2", {CAP_0: 2}),),
        ],
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-with-subrequest",
        [
            _claim(
                "claim-0",
                DeviceRequest(
                    "req-0",
                    first_available=(_sub("subReq-0", 4), _sub("subReq-1", 2), _sub("subReq-1")),
                ),
            )
        ],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: _ranged(2)}, multi=True),
            )
        ],
        [(_shared("req-0/subReq-1", "device-1", {CAP_0: 2}),)],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity",
        [_claim("claim-0", _request("req-0", capacity=2))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: _ranged(2)}, multi=True),
            )
        ],
        classes=MULTI_A,
        allocated=[_held("device-1", {CAP_0: 2})],
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity",
        [_claim("claim-0", _request("req-0", capacity=2, mode=AllocationMode.ALL))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: 2}, multi=True),
                _device("device-2", multi=True),
            )
        ],
        [(_shared("req-0", "device-1", {CAP_0: 2}),)],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity",
        [_claim("claim-0", _request("req-0", capacity=2, mode=AllocationMode.ALL))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: 2}, multi=True),
                _device("device-2", {CAP_0: 1}, multi=True),
            )
        ],
        [(_shared("req-0", "device-1", {CAP_0: 2}),)],
        classes=MULTI_A,
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient",
        [
            _claim(
                "claim-0",
                _request("req-0", capacity=1),
                _request("req-1", capacity=1, mode=AllocationMode.ALL),
            )
        ],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: 2}, multi=True),
                _device("device-2", {CAP_0: 1}, multi=True),
            )
        ],
        [
            (
                _shared("req-0", "device-1", {CAP_0: 1}),
                _shared("req-1", "device-1", {CAP_0: 1}),
                _shared("req-1", "device-2", {CAP_0: 1}),
            )
        ],
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient",
        [_claim("claim-0", _request("req-0", capacity=1, mode=AllocationMode.ALL))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: 2}, multi=True),
                _device("device-2", {CAP_0: 1}, multi=True),
            )
        ],
        [(_shared("req-0", "device-1", {CAP_0: 1}), _shared("req-0", "device-2", {CAP_0: 1}))],
        allocated=[_held("device-1", {CAP_0: 1})],
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient",
        [
            _claim(
                "claim-0",
                _request("req-0", capacity=1),
                _request("req-1", capacity=1, mode=AllocationMode.ALL),
            )
        ],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: 1}, multi=True),
                _device("device-2", {CAP_0: 1}, multi=True),
            )
        ],
    ),
    Case(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient",
        [_claim("claim-0", _request("req-0", capacity=1, mode=AllocationMode.ALL))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: 1}, multi=True),
                _device("device-2", {CAP_0: 1}, multi=True),
            )
        ],
        [(_shared("req-0", "device-2", {CAP_0: 1}),)],
        allocated=[_held("device-1", {CAP_0: 1})],
    ),
    Case(
        "consumable-capacity-dedicated-device-with-consumable-capacity-request",
        [_claim("claim-0", _request("req-0", capacity=1))],
        [_slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1", {CAP_0: 1}))],
        [(_got("req-0", "device-1"),)],
        classes=[_class(multi=False)],
    ),
    Case(
        "consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request",
        [
            _claim("claim-0", _request("req-0", capacity=1)),
            _claim("claim-1", _request("req-0", capacity=1)),
        ],
        [_slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1", {CAP_0: _ranged(2)}))],
        classes=[_class(multi=False)],
    ),
    Case(
        "allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector",
        [_claim("claim-0", _request("req-0", capacity=1))],
        [_slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1", {CAP_0: 1}, multi=True))],
        classes=[_class(multi=False)],
    ),
    Case(
        "allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated",
        [_claim("claim-0", _request("req-0", capacity=1))],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", {CAP_0: _ranged(2)}, multi=True),
            )
        ],
        classes=MULTI_A,
        allocated=[_held("device-1")],
    ),
    Case(
        "allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable",
        [_claim("claim-0", _request("req-0", capacity=1))],
        [_slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1", {CAP_0: _ranged(2)}))],
        classes=MULTI_A,
        allocated=[_held("device-1", {CAP_0: 1})],
    ),
    Case(
        "with-distinct-constraints",
        [
            _claim(
                "claim-0",
                *(_request(f"req-{i}") for i in range(4)),
                constraints=(
                    DeviceConstraint(("req-0", "req-1"), distinct_attribute=BOOL),
                    DeviceConstraint(("req-0", "req-1", "req-2"), distinct_attribute=VERSION),
                    DeviceConstraint(("req-0", "req-1", "req-2", "req-3"), distinct_attribute=INT),
                ),
            )
        ],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                *(
                    _device(
                        f"device-{i + 1}",
                        attributes={
                            "driverVersion": Version(version),
                            "numa": i,
                            "boolAttribute": flag,
                        },
                        multi=True,
                    )
                    for i, (version, flag) in enumerate(
                        [("1.0.0", True), ("1.0.1", False), ("1.0.2", True), ("1.0.0", True)]
                    )
                ),
            )
        ],
        [tuple(_shared(f"req-{i}", f"device-{i + 1}") for i in range(4))],
    ),
    Case(
        "with-distinct-constraints-attribute-not-set",
        [
            _claim(
                "claim-0",
                _request("req-0"),
                constraints=(DeviceConstraint(("req-0",), distinct_attribute=BOOL),),
            )
        ],
        [_slice("slice-1", NODE_1, POOL_1, DRIVER_A, _device("device-1", multi=True))],
    ),
    Case(
        "with-distinct-constraints-with-subrequests",
        [
            _claim(
                "claim-0",
                *(
                    DeviceRequest(
                        f"req-{i}",
                        first_available=(
                            _sub(
                                "subReq-0",
                                selectors=(f'device.attributes["{DRIVER_A}"].boolAttribute',),
                            ),
                            _sub("subReq-1"),
                        ),
                    )
                    for i in range(3)
                ),
                constraints=(DeviceConstraint(("req-0", "req-1"), distinct_attribute=BOOL),),
            )
        ],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device("device-1", attributes={"boolAttribute": True}, multi=True),
                _device("device-2", attributes={"boolAttribute": False}, multi=True),
            )
        ],
        [
            (
                _shared("req-0/subReq-0", "device-1"),
                _shared("req-1/subReq-1", "device-2"),
                _shared("req-2/subReq-0", "device-1"),
            )
        ],
    ),
    Case(
        "distinct-constraint-one-multi-allocatable-device-with-distinct-constraint",
        [
            _claim(
                "claim-0",
                _request("req-0", capacity=1),
                _request("req-1", capacity=1),
                constraints=(DeviceConstraint(distinct_attribute=STRING),),
            )
        ],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device(
                    "device-1",
                    {CAP_0: _ranged(2)},
                    {"stringAttribute": "stringAttributeValue"},
                    True,
                ),
            )
        ],
        classes=MULTI_A,
    ),
    Case(
        "distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint",
        [
            _claim(
                "claim-0",
                _request("req-0", capacity=2),
                _request("req-1", capacity=2),
                constraints=(DeviceConstraint(distinct_attribute=STRING),),
            )
        ],
        [
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device(
                    "device-1",
                    {CAP_0: _ranged(4)},
                    {"stringAttribute": "stringAttributeValue1"},
                    True,
                ),
                count=2,
            ),
            _slice(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                _device(
                    "device-2",
                    {CAP_0: _ranged(4)},
                    {"stringAttribute": "stringAttributeValue2"},
                    True,
                ),
                count=2,
            ),
        ],
        [(_shared("req-0", "device-1", {CAP_0: 2}), _shared("req-1", "device-2", {CAP_0: 2}))],
        classes=MULTI_A,
    ),
]


def _shape(
    result: DeviceRequestAllocationResult,
) -> tuple[str, str, str, str, bool, bool, dict[str, int]]:
    return (
        result.request,
        result.driver,
        result.pool,
        result.device,
        result.admin_access,
        result.share_id is not None,
        dict(result.consumed_capacity),
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_kube_scheduler_allocator_cases(case: Case) -> None:
    outcome = allocate(case.claims, case.node, case.slices, case.classes, case.allocated)
    if case.error:
        assert isinstance(outcome, CannotAllocate)
        assert case.error in outcome.problem
        return
    if case.expect is None:
        assert isinstance(outcome, CannotAllocate), outcome
        assert outcome.problem == ""
        return
    assert isinstance(outcome, Allocation), outcome
    got = [sorted(map(_shape, result.results)) for result in outcome.results]
    assert got == [sorted(expected) for expected in case.expect]
    for result in outcome.results:  # every device is node-local here
        assert result.node_name == case.node


# vgpu's own GPU devices --------------------------------------------------------------------
GPU_CLASS = DeviceClass("gpu.vgpu.io", ('device.driver == "gpu.vgpu.io"',))
MI = 2**20


def _gpu_slice(node: str, *memory_mib: int) -> ResourceSlice:
    cards = [
        GpuCard(f"GPU-{node}-{i}", i, "NVIDIA A100-SXM4-80GB", m) for i, m in enumerate(memory_mib)
    ]
    return node_slice(node, [gpu_device(c) for c in cards])


def _gpu_claim(name: str, count: int = 1, **capacity: int) -> ResourceClaim:
    request = ExactDeviceRequest("gpu.vgpu.io", count=count, capacity=capacity)
    return ResourceClaim(name, "ml", f"uid-{name}", (DeviceRequest("gpu", exactly=request),))


def test_a_gpu_share_consumes_the_rounded_request_and_defaults_for_the_rest() -> None:
    outcome = allocate(
        [_gpu_claim("a", memory=20 * GI + 1)], "n", [_gpu_slice("n", 81920)], [GPU_CLASS]
    )
    assert isinstance(outcome, Allocation)
    (result,) = outcome.results[0].results
    assert result.consumed_capacity == {"memory": 20 * GI + MI, "cores": 100}  # a MiB up; all cores
    assert result.share_id is not None and outcome.results[0].node_name == "n"


def test_shares_fill_a_card_and_the_next_claim_goes_to_the_next_card() -> None:
    allocator = Allocator([_gpu_slice("n", 81920, 81920)], [GPU_CLASS])
    allocated = AllocatedDevices()
    devices = []
    for i in range(3):
        claim = _gpu_claim(f"c{i}", memory=40 * GI, cores=30)
        outcome = allocator.allocate([claim], "n", allocated)
        assert isinstance(outcome, Allocation)
        allocated.add(replace(claim, allocation=outcome.results[0]))
        devices.append(outcome.results[0].results[0].device)
    assert devices == ["gpu-0", "gpu-0", "gpu-1"]
    assert allocated.consumed(DeviceId("gpu.vgpu.io", "n", "gpu-0")) == {
        "gpu.vgpu.io/memory": 80 * GI,
        "gpu.vgpu.io/cores": 60,
    }
    allocated.remove("ml/c0")
    assert (
        allocated.consumed(DeviceId("gpu.vgpu.io", "n", "gpu-0"))["gpu.vgpu.io/memory"] == 40 * GI
    )


def test_share_ids_are_stable_and_distinct_per_result() -> None:
    claim = _gpu_claim("two", count=2, memory=GI, cores=10)
    first = allocate([claim], "n", [_gpu_slice("n", 81920, 81920)], [GPU_CLASS])
    again = allocate([claim], "n", [_gpu_slice("n", 81920, 81920)], [GPU_CLASS])
    assert isinstance(first, Allocation) and isinstance(again, Allocation)
    ids = [r.share_id for r in first.results[0].results]
    assert ids == [r.share_id for r in again.results[0].results] and len(set(ids)) == 2


def test_admin_access_takes_nothing_from_later_claims() -> None:
    admin = ResourceClaim(
        "admin",
        "ops",
        "u",
        allocation=AllocationResult(
            (
                DeviceRequestAllocationResult(
                    "gpu", "gpu.vgpu.io", "n", "gpu-0", True, "s", {"memory": 80 * GI, "cores": 100}
                ),
            )
        ),
    )
    outcome = allocate(
        [_gpu_claim("a", memory=80 * GI, cores=100)],
        "n",
        [_gpu_slice("n", 81920)],
        [GPU_CLASS],
        [admin],
    )
    assert isinstance(outcome, Allocation)


def test_a_full_node_says_which_capacity_is_short_on_each_device() -> None:
    held = ResourceClaim(
        "big",
        "ml",
        "u",
        allocation=AllocationResult(
            (
                DeviceRequestAllocationResult(
                    "gpu", "gpu.vgpu.io", "n", "gpu-0", False, "s", {"memory": 70 * GI, "cores": 50}
                ),
            )
        ),
    )
    outcome = allocate(
        [_gpu_claim("a", memory=20 * GI, cores=10)],
        "n",
        [_gpu_slice("n", 81920)],
        [GPU_CLASS],
        [held],
    )
    assert isinstance(outcome, CannotAllocate) and outcome.problem == ""
    (verdict,) = outcome.verdicts
    assert verdict.problem is DeviceProblem.INSUFFICIENT
    assert verdict.sentence == "memory: needs 20Gi, 10Gi free of 80Gi"
    assert verdict.short == 10 * GI
    assert outcome.unmet == ("claim ml/a, request gpu: 0 devices on n could serve it, it needs 1",)


@pytest.mark.parametrize(
    ("capacity", "sentence", "problem"),
    [
        (
            {"memory": 100 * GI},
            "memory: 100Gi is more than one claim may take (80Gi)",
            DeviceProblem.POLICY,
        ),
        ({"cores": 101}, "cores: 101 is more than one claim may take (100)", DeviceProblem.POLICY),
        (
            {"cores": 101, "memory": 1},  # above every valid value of cores (0, 50, 100)
            "cores: 101 is not allowed by its request policy (one of 0, 50, 100)",
            DeviceProblem.POLICY,
        ),
        ({"bandwidth": 1}, "has no capacity bandwidth", DeviceProblem.NO_CAPACITY),
    ],
)
def test_each_device_gets_a_sentence(
    capacity: dict[str, int], sentence: str, problem: DeviceProblem
) -> None:
    gpu = _gpu_slice("n", 81920)
    if "memory" in capacity:  # a driver that lets cores be taken in halves only
        cores = DeviceCapacity(100, RequestPolicy(default=100, valid_values=(0, 50, 100)))
        device = replace(gpu.devices[0], capacity={**gpu.devices[0].capacity, "cores": cores})
        gpu = replace(gpu, devices=(device,))
    outcome = allocate([_gpu_claim("a", **capacity)], "n", [gpu], [GPU_CLASS])
    assert isinstance(outcome, CannotAllocate)
    assert [(v.problem, v.sentence) for v in outcome.verdicts] == [(problem, sentence)]


def test_a_selector_that_fails_on_a_device_stops_allocation_with_its_error() -> None:
    claim = ResourceClaim(
        "a",
        "ml",
        "u",
        (
            DeviceRequest(
                "gpu",
                exactly=ExactDeviceRequest(
                    "gpu.vgpu.io", ('device.attributes["gpu.vgpu.io"].model == "x"',)
                ),
            ),
        ),
    )
    outcome = allocate([claim], "n", [_gpu_slice("n", 81920)], [GPU_CLASS])
    assert isinstance(outcome, CannotAllocate)
    assert outcome.problem.startswith("claim ml/a: selector #0 on device gpu.vgpu.io/n/gpu-0: ")
    assert "no such key: model" in outcome.problem


def test_an_unsupported_selector_is_an_error_never_a_match() -> None:
    claim = ResourceClaim(
        "a",
        "ml",
        "u",
        (
            DeviceRequest(
                "gpu",
                exactly=ExactDeviceRequest(
                    "gpu.vgpu.io", ('device.attributes["gpu.vgpu.io"].uuid.matches("GPU-.*")',)
                ),
            ),
        ),
    )
    outcome = allocate([claim], "n", [_gpu_slice("n", 81920)], [GPU_CLASS])
    assert isinstance(outcome, CannotAllocate) and "unsupported method matches()" in outcome.problem


def test_a_claim_over_the_result_limit_is_refused() -> None:
    outcome = allocate([_gpu_claim("a", count=33)], "n", [_gpu_slice("n", 81920)], [GPU_CLASS])
    assert isinstance(outcome, CannotAllocate)
    assert (
        outcome.problem
        == "claim ml/a: number of requested devices 33 exceeds the claim limit of 32"
    )


def test_a_request_that_rounds_past_int64_stops_allocation() -> None:
    huge = DeviceCapacity(2**63 - 1, RequestPolicy(valid_range=ValidRange(0, None, 2**62)))
    slice_ = _slice("s", NODE_1, POOL_1, DRIVER_A, _device("device-1", {CAP_0: huge}, multi=True))
    outcome = allocate(
        [_claim("c", _request("req-0", capacity=2**63 - 2))], NODE_1, [slice_], [_class()]
    )
    assert isinstance(outcome, CannotAllocate) and "rounds up past" in outcome.problem


def test_a_slice_for_all_nodes_ties_the_claim_to_no_node() -> None:
    shared = _slice("s", None, POOL_1, DRIVER_A, _device("device-1"))
    outcome = allocate([_claim("c", _request("req-0"))], NODE_2, [shared], [_class()])
    assert isinstance(outcome, Allocation) and outcome.results[0].node_name is None


def test_docstring_examples_hold() -> None:
    result = doctest.testmod(capacity_module)
    assert result.failed == 0 and result.attempted > 0
