"""The values of `model.py` as `resource.k8s.io/v1` JSON, ready to send to the API server.

Quantities are written as Kubernetes quantity strings: with a binary suffix when the amount
is a whole number of KiB or more (`20Gi`), plain digits otherwise (`50`). Reading the output
back with `read.py` gives the same values.
"""

from typing import Any

from vgpu.domain.dra.model import (
    AllocationMode,
    AllocationResult,
    AttributeValue,
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
    ResourceSlice,
    Version,
)

API_VERSION = "resource.k8s.io/v1"
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))

JSON = dict[str, Any]


def quantity_text(value: int) -> str:
    """`value` as a Kubernetes quantity: `20Gi` for 20 x 2^30, `1536Mi`, `50`.

    >>> quantity_text(21474836480), quantity_text(1536 * 2**20), quantity_text(50)
    ('20Gi', '1536Mi', '50')
    """
    for suffix, unit in _BINARY:
        if value >= unit and value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)


def resource_slice_json(slice_: ResourceSlice) -> JSON:
    """A ResourceSlice object."""
    spec: JSON = {
        "driver": slice_.driver,
        "pool": {
            "name": slice_.pool.name,
            "generation": slice_.pool.generation,
            "resourceSliceCount": slice_.pool.resource_slice_count,
        },
        "devices": [device_json(d) for d in slice_.devices],
    }
    if slice_.node_name is not None:
        spec["nodeName"] = slice_.node_name
    if slice_.all_nodes:
        spec["allNodes"] = True
    return _object("ResourceSlice", {"name": slice_.name}, spec)


def device_json(device: Device) -> JSON:
    """One device of a slice's `spec.devices`."""
    out: JSON = {"name": device.name}
    if device.attributes:
        out["attributes"] = {k: _attribute(v) for k, v in device.attributes.items()}
    if device.capacity:
        out["capacity"] = {k: _capacity(v) for k, v in device.capacity.items()}
    if device.allow_multiple_allocations:
        out["allowMultipleAllocations"] = True
    return out


def resource_claim_json(claim: ResourceClaim) -> JSON:
    """A ResourceClaim object, with its status when allocated or reserved."""
    meta: JSON = {"name": claim.name, "namespace": claim.namespace}
    if claim.uid:
        meta["uid"] = claim.uid
    devices: JSON = {"requests": [_request(r) for r in claim.requests]}
    if claim.constraints:
        devices["constraints"] = [_constraint(c) for c in claim.constraints]
    out = _object("ResourceClaim", meta, {"devices": devices})
    status: JSON = {}
    if claim.allocation is not None:
        status["allocation"] = allocation_json(claim.allocation)
    if claim.reserved_for:
        status["reservedFor"] = [
            {"resource": r.resource, "name": r.name, "uid": r.uid}
            | ({"apiGroup": r.api_group} if r.api_group else {})
            for r in claim.reserved_for
        ]
    if status:
        out["status"] = status
    return out


def allocation_json(allocation: AllocationResult) -> JSON:
    """`status.allocation` of a claim (the node selector ties it to `node_name`)."""
    out: JSON = {"devices": {"results": [_result(r) for r in allocation.results]}}
    if allocation.node_name is not None:
        out["nodeSelector"] = {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [allocation.node_name]}
                    ]
                }
            ]
        }
    return out


def device_class_json(device_class: DeviceClass) -> JSON:
    """A DeviceClass object."""
    spec: JSON = {"selectors": _selectors(device_class.selectors)}
    if device_class.extended_resource_name is not None:
        spec["extendedResourceName"] = device_class.extended_resource_name
    return _object("DeviceClass", {"name": device_class.name}, spec)


def _object(kind: str, metadata: JSON, spec: JSON) -> JSON:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def _attribute(value: AttributeValue) -> JSON:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, Version):
        return {"version": value.text}
    return {"string": value}


def _capacity(capacity: DeviceCapacity) -> JSON:
    out: JSON = {"value": quantity_text(capacity.value)}
    if capacity.policy is not None:
        out["requestPolicy"] = _policy(capacity.policy)
    return out


def _policy(policy: RequestPolicy) -> JSON:
    out: JSON = {}
    if policy.default is not None:
        out["default"] = quantity_text(policy.default)
    if policy.valid_values:
        out["validValues"] = [quantity_text(v) for v in policy.valid_values]
    if policy.valid_range is not None:
        limits = policy.valid_range
        out["validRange"] = {"min": quantity_text(limits.min)}
        if limits.max is not None:
            out["validRange"]["max"] = quantity_text(limits.max)
        if limits.step is not None:
            out["validRange"]["step"] = quantity_text(limits.step)
    return out


def _selectors(expressions: tuple[str, ...]) -> list[JSON]:
    return [{"cel": {"expression": e}} for e in expressions]


def _request(request: DeviceRequest) -> JSON:
    if request.exactly is not None:
        return {"name": request.name, "exactly": _exactly(request.exactly)}
    return {"name": request.name, "firstAvailable": [_sub(s) for s in request.first_available]}


def _exactly(exactly: ExactDeviceRequest) -> JSON:
    out = _wanted(exactly)
    if exactly.admin_access:
        out["adminAccess"] = True
    return out


def _sub(sub: DeviceSubRequest) -> JSON:
    return {"name": sub.name} | _wanted(sub)


def _wanted(request: ExactDeviceRequest | DeviceSubRequest) -> JSON:
    mode = request.allocation_mode
    out: JSON = {"deviceClassName": request.device_class_name, "allocationMode": mode.value}
    if mode is AllocationMode.EXACT_COUNT:
        out["count"] = request.count
    if request.selectors:
        out["selectors"] = _selectors(request.selectors)
    if request.capacity:
        out["capacity"] = {"requests": {k: quantity_text(v) for k, v in request.capacity.items()}}
    return out


def _constraint(constraint: DeviceConstraint) -> JSON:
    out: JSON = {}
    if constraint.requests:
        out["requests"] = list(constraint.requests)
    if constraint.match_attribute is not None:
        out["matchAttribute"] = constraint.match_attribute
    if constraint.distinct_attribute is not None:
        out["distinctAttribute"] = constraint.distinct_attribute
    return out


def _result(result: DeviceRequestAllocationResult) -> JSON:
    out: JSON = {
        "request": result.request,
        "driver": result.driver,
        "pool": result.pool,
        "device": result.device,
    }
    if result.admin_access:
        out["adminAccess"] = True
    if result.share_id is not None:
        out["shareID"] = result.share_id
    if result.consumed_capacity:
        out["consumedCapacity"] = {k: quantity_text(v) for k, v in result.consumed_capacity.items()}
    return out
