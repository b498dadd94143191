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
`gpu_device_class` (with `EXTENDED_RESOURCE`), `gpu_share` / `GpuShare` to read what an
allocation result consumes, and `published_cards` to read the cards back from slices.
`plan_claim` (`from_plan.py`) writes a pod's `nvidia.com/gpu*` request as a claim.

The webhook in DRA mode (`admission.py`): `screen_dra_pod` reads a pod being created into a
`DraPod` (or answers it), `translate_pod` gives its `ClaimTemplate`s and the patch
(`PodClaims`), with `DraAdmissionConfig`; `GPU_REQUEST` names each claim's one request.

What `vgpu dra-driver` decides on its node: `slice_problems` (the API server's rules for a
ResourceSlice, `slice_rules.py`); `node_device` (a GPU's device with the node's own attributes,
`STANDARD_PCI_BUS_ID`); `claim_shares` gives a claim's `DeviceShare`s on the node or
`ClaimRefused` (`limits.py`); `claim_spec` its CDI spec (`ClaimSpec`, `HamiCoreSetup`,
`cdi_device_name`, `CDI_KIND`, `NVIDIA_CDI_KIND`; `cdi.py`); `claims_beside` the claims a
container uses beside one (`pod_claims.py`); `over_capacity`, `shares_footprint`, `GpuHolder`,
`device_plugin_holders` (the node's own count, `node_ledger.py`); and the record of prepared
claims, `PreparedClaim`, `encode_prepared_record`, `decode_prepared_record`,
`encode_claim_info`, `decode_claim_info` (each claim's own `claim.json`, which a lost record
is rebuilt from), `PreparedRecordError` (`prepared_record.py`).
"""

from vgpu.domain.dra.admission import (
    GPU_REQUEST,
    ClaimTemplate,
    DraAdmissionConfig,
    DraPod,
    PodClaims,
    screen_dra_pod,
    translate_pod,
)
from vgpu.domain.dra.allocated import AllocatedDevices, DeviceId
from vgpu.domain.dra.allocator import Allocator, ShareIds, allocate, stable_share_id
from vgpu.domain.dra.capacity import CapacityError, consumed_quantity
from vgpu.domain.dra.cdi import (
    CDI_KIND,
    NVIDIA_CDI_KIND,
    ClaimSpec,
    HamiCoreSetup,
    cdi_device_name,
    claim_spec,
)
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
    published_cards,
)
from vgpu.domain.dra.limits import ClaimRefused, DeviceShare, claim_shares
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
from vgpu.domain.dra.node_devices import STANDARD_PCI_BUS_ID, node_device
from vgpu.domain.dra.node_ledger import (
    GpuHolder,
    device_plugin_holders,
    over_capacity,
    shares_footprint,
)
from vgpu.domain.dra.outcome import (
    Allocation,
    AllocationOutcome,
    CannotAllocate,
    DeviceProblem,
    DeviceVerdict,
)
from vgpu.domain.dra.pod_claims import claims_beside
from vgpu.domain.dra.prepared_record import (
    PreparedClaim,
    PreparedRecordError,
    decode_claim_info,
    decode_prepared_record,
    encode_claim_info,
    encode_prepared_record,
)
from vgpu.domain.dra.read import parse_device_class, parse_resource_claim, parse_resource_slice
from vgpu.domain.dra.slice_rules import slice_problems
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
    "CDI_KIND",
    "CORES",
    "DEFAULT_DRIVER",
    "EXTENDED_RESOURCE",
    "GPU_REQUEST",
    "MEMORY",
    "NVIDIA_CDI_KIND",
    "STANDARD_PCI_BUS_ID",
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
    "ClaimRefused",
    "ClaimSpec",
    "ClaimSuggestion",
    "ClaimTemplate",
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
    "DeviceShare",
    "DeviceSubRequest",
    "DeviceVerdict",
    "DeviceView",
    "DraAdmissionConfig",
    "DraError",
    "DraPod",
    "ExactDeviceRequest",
    "GpuCard",
    "GpuHolder",
    "GpuShare",
    "HamiCoreSetup",
    "PodClaims",
    "PreparedClaim",
    "PreparedRecordError",
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
    "cdi_device_name",
    "claim_shares",
    "claim_spec",
    "claims_beside",
    "compile_selector",
    "consumed_quantity",
    "decode_claim_info",
    "decode_prepared_record",
    "device_class_json",
    "device_json",
    "device_plugin_holders",
    "driver_version",
    "encode_claim_info",
    "encode_prepared_record",
    "explain_claims",
    "gpu_device",
    "gpu_device_class",
    "gpu_device_name",
    "gpu_share",
    "node_device",
    "node_slice",
    "over_capacity",
    "parse_device_class",
    "parse_resource_claim",
    "parse_resource_slice",
    "plan_claim",
    "published_cards",
    "quantity_text",
    "resource_claim_json",
    "resource_slice_json",
    "screen_dra_pod",
    "shares_footprint",
    "slice_problems",
    "stable_share_id",
    "translate_pod",
]
