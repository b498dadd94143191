"""The resource.k8s.io/v1 values: JSON read and written, and every unreadable field refused
with its path and value."""

import copy
import doctest
from types import ModuleType
from typing import Any

import pytest

from vgpu.domain.dra import (
    AllocationMode,
    AllocationResult,
    ConsumerReference,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    DraError,
    ExactDeviceRequest,
    GpuCard,
    GpuShare,
    ResourceClaim,
    Version,
    allocation_json,
    device_class_json,
    gpu_device,
    gpu_share,
    node_slice,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
    resource_claim_json,
    resource_slice_json,
)
from vgpu.domain.dra import gpu as gpu_module
from vgpu.domain.dra import write as write_module

GIB = 2**30

CLAIM: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "train", "namespace": "ml", "uid": "4b1c-uid"},
    "spec": {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": "gpu.vgpu.io",
                        "selectors": [{"cel": {"expression": 'device.driver == "gpu.vgpu.io"'}}],
                        "count": 2,
                        "capacity": {"requests": {"memory": "20Gi", "cores": 30}},
                        "tolerations": [{"operator": "Exists"}],
                    },
                },
                {
                    "name": "any",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu.vgpu.io", "count": 1},
                        {"name": "all", "deviceClassName": "gpu.vgpu.io", "allocationMode": "All"},
                    ],
                },
            ],
            "constraints": [{"requests": ["gpu"], "distinctAttribute": "gpu.vgpu.io/uuid"}],
            "config": [{"opaque": {"driver": "gpu.vgpu.io", "parameters": {"x": 1}}}],
        }
    },
    "status": {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": "gpu.vgpu.io",
                        "pool": "node-a",
                        "device": "gpu-0",
                        "shareID": "9d1e-share",
                        "consumedCapacity": {"memory": "20Gi", "cores": "30"},
                    }
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node-a"]}
                        ]
                    }
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "train-0", "uid": "pod-uid"}],
    },
}


def test_a_claim_reads_into_values_with_exact_quantities() -> None:
    claim = parse_resource_claim(CLAIM)
    assert claim == ResourceClaim(
        name="train",
        namespace="ml",
        uid="4b1c-uid",
        requests=(
            DeviceRequest(
                "gpu",
                exactly=ExactDeviceRequest(
                    device_class_name="gpu.vgpu.io",
                    selectors=('device.driver == "gpu.vgpu.io"',),
                    count=2,
                    capacity={"memory": 20 * GIB, "cores": 30},
                ),
            ),
            DeviceRequest(
                "any",
                first_available=(
                    DeviceSubRequest("big", "gpu.vgpu.io"),
                    DeviceSubRequest("all", "gpu.vgpu.io", allocation_mode=AllocationMode.ALL),
                ),
            ),
        ),
        constraints=(DeviceConstraint(("gpu",), distinct_attribute="gpu.vgpu.io/uuid"),),
        allocation=AllocationResult(
            (
                DeviceRequestAllocationResult(
                    "gpu",
                    "gpu.vgpu.io",
                    "node-a",
                    "gpu-0",
                    share_id="9d1e-share",
                    consumed_capacity={"memory": 20 * GIB, "cores": 30},
                ),
            ),
            node_name="node-a",
        ),
        reserved_for=(ConsumerReference("pods", "train-0", "pod-uid"),),
    )
    assert claim.key == "ml/train"


def test_a_claim_written_reads_back_the_same() -> None:
    claim = parse_resource_claim(CLAIM)
    written = resource_claim_json(claim)
    assert parse_resource_claim(written) == claim
    assert written["status"]["allocation"] == allocation_json(
        claim.allocation or AllocationResult()
    )
    result = written["status"]["allocation"]["devices"]["results"][0]
    assert result["consumedCapacity"] == {"memory": "20Gi", "cores": "30"}


def test_a_gpu_nodes_slice_round_trips_with_its_request_policies() -> None:
    cards = [
        GpuCard(
            "GPU-a",
            0,
            "NVIDIA A100-SXM4-80GB",
            81920,
            numa_node=1,
            architecture="Ampere",
            driver_version="535.104.05",
        ),
        GpuCard("GPU-b", 1, "NVIDIA A100-SXM4-80GB", 81920),
    ]
    slice_ = node_slice("node-a", [gpu_device(c) for c in cards], generation=3)
    written = resource_slice_json(slice_)
    assert parse_resource_slice(written) == slice_
    device = written["spec"]["devices"][0]
    assert written["spec"]["pool"] == {"name": "node-a", "generation": 3, "resourceSliceCount": 1}
    assert written["spec"]["nodeName"] == "node-a"
    assert device["name"] == "gpu-0" and device["allowMultipleAllocations"] is True
    assert device["capacity"]["memory"] == {
        "value": "80Gi",
        "requestPolicy": {
            "default": "80Gi",
            "validRange": {"min": "1Mi", "max": "80Gi", "step": "1Mi"},
        },
    }
    assert device["capacity"]["cores"] == {
        "value": "100",
        "requestPolicy": {"default": "100", "validRange": {"min": "0", "max": "100", "step": "1"}},
    }
    assert device["attributes"] == {
        "uuid": {"string": "GPU-a"},
        "index": {"int": 0},
        "productName": {"string": "NVIDIA A100-SXM4-80GB"},
        "type": {"string": "NVIDIA"},
        "numaNode": {"int": 1},
        "architecture": {"string": "Ampere"},
        "driverVersion": {"version": "535.104.5"},
    }
    assert "architecture" not in written["spec"]["devices"][1]["attributes"]


def test_a_device_class_round_trips() -> None:
    device_class = DeviceClass("gpu.vgpu.io", ('device.driver == "gpu.vgpu.io"',), "nvidia.com/gpu")
    assert parse_device_class(device_class_json(device_class)) == device_class
    assert parse_device_class({"metadata": {"name": "plain"}}) == DeviceClass("plain")


def test_version_attributes_stay_versions_and_unknown_fields_are_ignored() -> None:
    slice_ = {
        "metadata": {"name": "s"},
        "spec": {
            "driver": "other.example.com",
            "pool": {"name": "p", "generation": 0, "resourceSliceCount": 1},
            "allNodes": True,
            "sharedCounters": [{"name": "x"}],
            "devices": [
                {
                    "name": "d",
                    "attributes": {
                        "other.example.com/v": {"version": "1.2.3"},
                        "ok": {"bool": False},
                    },
                    "taints": [{"key": "k", "effect": "NoSchedule"}],
                }
            ],
        },
    }
    device = parse_resource_slice(slice_).devices[0]
    assert device.attributes == {"other.example.com/v": Version("1.2.3"), "ok": False}
    assert parse_resource_slice(slice_).all_nodes


def _set(document: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    target: Any = changed
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return changed


EXACTLY = ("spec", "devices", "requests", 0, "exactly")
RESULT = ("status", "allocation", "devices", "results", 0)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            (*EXACTLY, "capacity", "requests", "memory"),
            "-1Gi",
            "ResourceClaim ml/train: spec.devices.requests[0].exactly.capacity.requests.memory: "
            "'-1Gi' is negative",
        ),
        ((*EXACTLY, "capacity", "requests", "memory"), "1e40", "'1e40' is out of range"),
        (
            (*EXACTLY, "capacity", "requests", "cores"),
            "0.5",
            "'0.5' is not a whole number of units",
        ),
        (
            (*EXACTLY, "capacity", "requests", "cores"),
            "9Ei",
            "is too large (at most 9223372036854775807)",
        ),
        (
            (*EXACTLY, "capacity", "requests", "cores"),
            "lots",
            "'lots' is not a Kubernetes quantity",
        ),
        ((*EXACTLY, "capacity", "requests", "cores"), True, "True is not a quantity"),
        ((*EXACTLY, "capacity", "requests", "cores"), "1" * 70, "is longer than 64 characters"),
        (
            (*EXACTLY, "capacity", "requests"),
            {"mem ory": "1Gi"},
            "capacity.requests['mem ory']: 'mem ory' is not a qualified name",
        ),
        (
            (*EXACTLY, "capacity", "requests"),
            {"Bad_Domain!/memory": "1Gi"},
            "has a domain that is not a DNS subdomain",
        ),
        (
            (*EXACTLY, "allocationMode"),
            "Some",
            "exactly.allocationMode: 'Some' is not an allocation mode",
        ),
        ((*EXACTLY, "count"), 0, "exactly.count: 0 is out of range (1..9223372036854775807)"),
        ((*EXACTLY, "count"), "2", "exactly.count: '2' is not a whole number"),
        ((*EXACTLY, "adminAccess"), "yes", "exactly.adminAccess: 'yes' is not a boolean"),
        (
            (*EXACTLY, "selectors"),
            [{"expression": "x"}],
            "selectors[0]: {'expression': 'x'} has no cel expression",
        ),
        ((*EXACTLY, "selectors"), "device", "exactly.selectors: 'device' is not a list"),
        ((*EXACTLY, "deviceClassName"), "", "exactly.deviceClassName: '' is empty"),
        (
            ("spec", "devices", "requests", 0),
            {"name": "gpu"},
            "requests[0]: {'name': 'gpu'} must have exactly one of exactly, firstAvailable",
        ),
        (
            ("spec", "devices", "constraints", 0),
            {"matchAttribute": "a.b/c", "distinctAttribute": "a.b/c"},
            "must have exactly one of matchAttribute, distinctAttribute",
        ),
        (
            ("spec", "devices", "constraints", 0, "distinctAttribute"),
            "uuid",
            "distinctAttribute: 'uuid' must be a fully qualified name",
        ),
        ((*RESULT, "device"), None, "results[0].device: missing"),
        ((*RESULT, "shareID"), 7, "results[0].shareID: 7 is not a string"),
        (
            (*RESULT, "consumedCapacity", "memory"),
            "-5",
            "consumedCapacity.memory: '-5' is negative",
        ),
        (("status", "reservedFor"), [{"resource": "pods"}], "reservedFor[0].name: missing"),
        (("spec", "devices", "requests"), [{}] * 2000, "has more than 1024 items"),
        (("metadata", "namespace"), 5, "metadata.namespace: 5 is not a string"),
    ],
)
def test_an_unreadable_claim_field_is_named_with_its_value(
    path: tuple[Any, ...], value: Any, message: str
) -> None:
    with pytest.raises(DraError) as caught:
        parse_resource_claim(_set(CLAIM, path, value))
    assert message in str(caught.value)


def test_garbage_is_refused_whole() -> None:
    with pytest.raises(DraError, match=r"ResourceClaim: spec: 'x' is not an object"):
        parse_resource_claim({"spec": "x"})
    with pytest.raises(
        DraError, match=r"ResourceSlice: \(whole object\): \[1, 2\] is not an object"
    ):
        parse_resource_slice([1, 2])


SLICE = resource_slice_json(node_slice("node-a", [gpu_device(GpuCard("GPU-a", 0, "T4", 15360))]))
DEVICE = ("spec", "devices", 0)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            (*DEVICE, "capacity", "memory", "value"),
            "-80Gi",
            "capacity.memory.value: '-80Gi' is negative",
        ),
        (
            (*DEVICE, "capacity", "memory", "requestPolicy", "validRange", "step"),
            "0",
            "validRange.step: '0' is zero (a step is at least 1)",
        ),
        (
            (*DEVICE, "attributes", "index"),
            {"int": 1, "string": "1"},
            "must have exactly one of int, bool, string, version",
        ),
        ((*DEVICE, "attributes", "index"), {"int": 2**70}, "is out of range"),
        ((*DEVICE, "attributes", "uuid"), {"string": "x" * 65}, "is longer than 64 characters"),
        ((*DEVICE, "attributes"), {"9lives": {"int": 1}}, "'9lives' is not a qualified name"),
        ((*DEVICE, "allowMultipleAllocations"), "true", "'true' is not a boolean"),
        (
            (*DEVICE, "attributes", "driverVersion"),
            {"version": "550.54"},
            "attributes.driverVersion.version: '550.54' is not a semantic version",
        ),
        (("spec", "pool", "resourceSliceCount"), 0, "resourceSliceCount: 0 is out of range"),
        (("spec", "driver"), "x" * 64, "is longer than 63 characters"),
    ],
)
def test_an_unreadable_slice_field_is_named_with_its_value(
    path: tuple[Any, ...], value: Any, message: str
) -> None:
    with pytest.raises(DraError) as caught:
        parse_resource_slice(_set(SLICE, path, value))
    assert message in str(caught.value)
    assert str(caught.value).startswith("ResourceSlice node-a-gpu.vgpu.io: ")


def test_a_hostile_value_is_cut_short_in_the_message() -> None:
    with pytest.raises(DraError) as caught:
        parse_resource_claim(_set(CLAIM, (*EXACTLY, "count"), "9" * 5000))
    assert len(str(caught.value)) < 300


@pytest.mark.parametrize("module", [gpu_module, write_module])
def test_docstring_examples_hold(module: ModuleType) -> None:
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0


def _result(consumed: dict[str, int]) -> DeviceRequestAllocationResult:
    return DeviceRequestAllocationResult(
        "gpu", "gpu.vgpu.io", "node-a", "gpu-0", False, "s", consumed
    )


def test_a_share_reads_memory_and_cores_by_either_spelling() -> None:
    assert gpu_share(_result({"memory": 20 * GIB, "cores": 30})) == GpuShare(20 * GIB, 30)
    assert gpu_share(_result({"gpu.vgpu.io/memory": GIB, "cores": 0})) == GpuShare(GIB, 0)


@pytest.mark.parametrize(
    ("consumed", "message"),
    [
        (
            {"memory": GIB, "cores": 1, "bandwidth": 5},
            "allocation result 'gpu' (node-a/gpu-0): consumedCapacity['bandwidth']: 5 is a "
            "capacity gpu.vgpu.io does not publish (it publishes memory, cores)",
        ),
        ({"memory": GIB}, "consumedCapacity: {'memory': 1073741824} has no cores"),
        ({"memory": GIB, "gpu.vgpu.io/memory": GIB, "cores": 1}, "names memory twice"),
        ({"other.io/memory": GIB, "cores": 1}, "'other.io/memory'"),
    ],
)
def test_a_share_with_unknown_or_missing_capacities_is_refused(
    consumed: dict[str, int], message: str
) -> None:
    with pytest.raises(DraError) as caught:
        gpu_share(_result(consumed))
    assert message in str(caught.value)
