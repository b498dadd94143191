"""Kubernetes Dynamic Resource Allocation (`resource.k8s.io/v1`) in vgpu's terms: pure
values, read from and written to the API's JSON. Standard library only.

Values (`model.py`): `ResourceSlice` (`ResourcePool`, `Device`, `DeviceCapacity`,
`RequestPolicy`, `ValidRange`, attribute values `int | bool | str | Version` =
`AttributeValue`), `ResourceClaim` (`DeviceRequest`, `ExactDeviceRequest`, `DeviceSubRequest`,
`AllocationMode`, `DeviceConstraint`, `AllocationResult`, `DeviceRequestAllocationResult`,
`ConsumerReference`), `DeviceClass`. Quantities are exact ints (bytes, cores).

JSON: `parse_resource_slice`, `parse_resource_claim`, `parse_device_class` (DraError names the
object, field path and value of anything unreadable); `resource_slice_json`, `device_json`,
`resource_claim_json`, `allocation_json`, `device_class_json`, `quantity_text`.

Allocation (`allocator.py`, kube-scheduler's structured allocation with consumable capacity):
`Allocator` (built once from slices and classes; `allocate(claims, node, allocated)`),
`allocate` (one call), `AllocatedDevices` (what allocated claims hold, kept claim by claim),
`DeviceId`; the answers `Allocation` or `CannotAllocate` (`AllocationOutcome`) with
`DeviceVerdict` / `DeviceProblem` per device and request; `stable_share_id`; `CapacityError`
and `consumed_quantity` (request policy rounding). Selectors (`cel.py`): `compile_selector`,
`Selector`, `DeviceView`, `SelectorError`. Why claims cannot be allocated, node by node, and
what would change that (`explain.py`): `explain_claims` gives a `ClaimsExplanation`
(`ClaimNodeVerdict`, `ClaimSuggestion`).

vgpu's GPU as a device (`gpu.py`): `DEFAULT_DRIVER` (`gpu.vgpu.io`), capacity names `MEMORY`
and `CORES`, `GpuCard`, `gpu_device`, `gpu_device_name`, `node_slice`, `driver_version`,
`gpu_device_class` (with `EXTENDED_RESOURCE`), and `gpu_share` / `GpuShare` to read what an
allocation result consumes. `plan_claim` (`from_plan.py`) writes a pod's `nvidia.com/gpu*`
request as a claim.
"""

from vgpu.domain.dra.allocated import AllocatedDevices, DeviceId
from vgpu.domain.dra.allocator import Allocator, ShareIds, allocate, stable_share_id
from vgpu.domain.dra.capacity import CapacityError, consumed_quantity
from vgpu.domain.dra.cel import DeviceView, Selector, SelectorError, compile_selector
from vgpu.domain.dra.explain import (
    ClaimNodeVerdict,
    ClaimsExplanation,
    ClaimSuggestion,
    explain_claims,
)
from vgpu.domain.dra.from_plan import plan_claim
from vgpu.domain.dra.gpu import (
    CORES,
    DEFAULT_DRIVER,
    EXTENDED_RESOURCE,
    MEMORY,
    GpuCard,
    GpuShare,
    driver_version,
    gpu_device,
    gpu_device_class,
    gpu_device_name,
    gpu_share,
    node_slice,
)
from vgpu.domain.dra.model import (
    AllocationMode,
    AllocationResult,
    AttributeValue,
    ConsumerReference,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    ExactDeviceRequest,
    RequestPolicy,
    ResourceClaim,
    ResourcePool,
    ResourceSlice,
    ValidRange,
    Version,
)
from vgpu.domain.dra.outcome import (
    Allocation,
    AllocationOutcome,
    CannotAllocate,
    DeviceProblem,
    DeviceVerdict,
)
from vgpu.domain.dra.read import parse_device_class, parse_resource_claim, parse_resource_slice
from vgpu.domain.dra.write import (
    allocation_json,
    device_class_json,
    device_json,
    quantity_text,
    resource_claim_json,
    resource_slice_json,
)
from vgpu.domain.errors import DraError

__all__ = [
    "CORES",
    "DEFAULT_DRIVER",
    "EXTENDED_RESOURCE",
    "MEMORY",
    "AllocatedDevices",
    "Allocation",
    "AllocationMode",
    "AllocationOutcome",
    "AllocationResult",
    "Allocator",
    "AttributeValue",
    "CannotAllocate",
    "CapacityError",
    "ClaimNodeVerdict",
    "ClaimSuggestion",
    "ClaimsExplanation",
    "ConsumerReference",
    "Device",
    "DeviceCapacity",
    "DeviceClass",
    "DeviceConstraint",
    "DeviceId",
    "DeviceProblem",
    "DeviceRequest",
    "DeviceRequestAllocationResult",
    "DeviceSubRequest",
    "DeviceVerdict",
    "DeviceView",
    "DraError",
    "ExactDeviceRequest",
    "GpuCard",
    "GpuShare",
    "RequestPolicy",
    "ResourceClaim",
    "ResourcePool",
    "ResourceSlice",
    "Selector",
    "SelectorError",
    "ShareIds",
    "ValidRange",
    "Version",
    "allocate",
    "allocation_json",
    "compile_selector",
    "consumed_quantity",
    "device_class_json",
    "device_json",
    "driver_version",
    "explain_claims",
    "gpu_device",
    "gpu_device_class",
    "gpu_device_name",
    "gpu_share",
    "node_slice",
    "parse_device_class",
    "parse_resource_claim",
    "parse_resource_slice",
    "plan_claim",
    "quantity_text",
    "resource_claim_json",
    "resource_slice_json",
    "stable_share_id",
]
