"""Why a pod's claims cannot be allocated, node by node, and what would change that; and
how a pod's `nvidia.com/gpu*` request is written as a claim."""

import pytest

from vgpu.domain import Device, PodPlan, PodPolicies, SchedulingConfig, plan_pod, pod_from_manifest
from vgpu.domain.dra import (
    AllocationResult,
    Allocator,
    DeviceConstraint,
    DeviceRequest,
    DeviceRequestAllocationResult,
    ExactDeviceRequest,
    GpuCard,
    ResourceClaim,
    ResourceSlice,
    explain_claims,
    gpu_device,
    gpu_device_class,
    node_slice,
    plan_claim,
)
from vgpu.domain.errors import DomainError
from vgpu.domain.pod import PodClaim

GI = 2**30
DRIVER = "gpu.vgpu.io"


def _node(name: str, product: str, memory_gib: int) -> ResourceSlice:
    card = GpuCard(f"GPU-{name}", 0, product, memory_gib * 1024)
    return node_slice(name, [gpu_device(card)])


def _held(name: str, node: str, memory_gib: int) -> ResourceClaim:
    result = DeviceRequestAllocationResult(
        "gpu",
        DRIVER,
        node,
        "gpu-0",
        False,
        f"share-{name}",
        {"memory": memory_gib * GI, "cores": 10},
    )
    return ResourceClaim(name, "ml", f"uid-{name}", allocation=AllocationResult((result,), node))


A100 = 'device.attributes["gpu.vgpu.io"].productName == "NVIDIA A100-SXM4-80GB"'
CLAIM = ResourceClaim(
    "train-gpu",
    "ml",
    "uid",
    (
        DeviceRequest(
            "gpu",
            exactly=ExactDeviceRequest(DRIVER, (A100,), capacity={"memory": 20 * GI, "cores": 10}),
        ),
    ),
)
SLICES = [
    _node("node-a", "NVIDIA A100-SXM4-80GB", 80),
    _node("node-b", "NVIDIA A10", 24),
    _node("node-c", "NVIDIA A100-SXM4-40GB", 40),
]
HELD = [_held("big", "node-a", 70)]


def test_each_node_says_what_stands_in_the_way_and_what_would_change_it() -> None:
    allocator = Allocator(SLICES, [gpu_device_class()])
    explanation = explain_claims("ml/train", [CLAIM], allocator, HELD)
    assert not explanation.fits
    assert explanation.lines() == [
        "pod ml/train: its claims fit on 0/3 nodes: 2 request selector, 1 insufficient capacity",
        "  2 nodes, request selector: node-b, node-c",
        f"    closest: node-b: gpu-0: does not match selector #0: {A100}",
        "  1 node, insufficient capacity: node-a",
        "    closest: node-a: gpu-0: memory: needs 20Gi, 10Gi free of 80Gi",
        "  they would fit with one of these changes:",
        "    - ask for at most 10Gi of memory in request gpu of claim ml/train-gpu (now 20Gi): "
        "it fits on node-a",
        f"    - drop selector #0 of request gpu of claim ml/train-gpu ({A100}): it fits on node-b",
        "    - wait for ml/big to be deallocated: they then fit on node-a",
    ]
    document = explanation.to_dict()
    assert document["fits"] is False and len(document["nodes"]) == 3
    assert [s["change"] for s in document["suggestions"]] == ["capacity", "selector", "wait"]


def test_a_fitting_claim_names_the_devices_it_would_get() -> None:
    allocator = Allocator(SLICES, [gpu_device_class()])
    explanation = explain_claims("ml/train", [CLAIM], allocator, [])
    assert explanation.fits
    assert explanation.lines()[:2] == [
        "pod ml/train: its claims fit on 1/3 nodes, node-a among them",
        "  would get on node-a: ml/train-gpu: node-a/gpu-0 (cores 10, memory 20Gi)",
    ]


def test_an_allocator_error_is_the_nodes_sentence() -> None:
    claim = ResourceClaim(
        "c", "ml", "u", (DeviceRequest("gpu", exactly=ExactDeviceRequest("nope")),)
    )
    allocator = Allocator(SLICES[:1], [gpu_device_class()])
    explanation = explain_claims("ml/p", [claim], allocator, [])
    assert explanation.lines()[1:3] == [
        "  1 node, error: node-a",
        "    closest: node-a: claim ml/c, request gpu: could not retrieve device class nope",
    ]


def test_too_few_devices_for_a_count_suggests_fewer() -> None:
    claim = ResourceClaim(
        "c", "ml", "u", (DeviceRequest("gpu", exactly=ExactDeviceRequest(DRIVER, count=2)),)
    )
    allocator = Allocator(SLICES[:1], [gpu_device_class()])
    explanation = explain_claims("ml/p", [claim], allocator, [])
    assert explanation.verdicts[0].reason == "too few devices"
    assert explanation.suggestions[0].text == (
        "ask for 1 devices in request gpu of claim ml/c (now 2): it fits on node-a"
    )


# the claim vgpu writes for a pod's nvidia.com/gpu* limits ------------------------------------
CARDS = [
    Device("GPU-1", 0, "NVIDIA A100-SXM4-80GB", 10, 81920),
    Device("GPU-2", 0, "NVIDIA T4", 10, 16384),
    Device("GPU-3", 1, "NVIDIA A100-SXM4-80GB", 10, 81920),
]


def _plan(limits: dict[str, str], annotations: dict[str, str] | None = None) -> PodPlan:
    manifest = {
        "metadata": {"name": "p", "namespace": "ml", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]},
    }
    plan = plan_pod(pod_from_manifest(manifest), SchedulingConfig(policies=PodPolicies()))
    assert plan is not None
    return plan


def test_gpumem_becomes_bytes_and_gpucores_percent() -> None:
    claim = plan_claim(
        _plan({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"}),
        CARDS,
    )
    assert (claim.name, claim.namespace) == ("p-gpu", "ml")
    assert claim.requests == (
        DeviceRequest(
            "main",
            exactly=ExactDeviceRequest(
                DRIVER, count=2, capacity={"cores": 30, "memory": 20000 * 2**20}
            ),
        ),
    )


def test_a_memory_percentage_asks_its_share_of_each_card_size() -> None:
    plan = _plan({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "25"})
    (request,) = plan_claim(plan, CARDS).requests
    assert request.exactly is None
    sizes = [(s.name, s.capacity["memory"]) for s in request.first_available]
    assert sizes == [("card-81920mi", 20480 * 2**20), ("card-16384mi", 4096 * 2**20)]
    assert request.first_available[1].selectors == (
        'device.capacity["gpu.vgpu.io"].memory.compareTo(quantity("16384Mi")) == 0',
    )


def test_a_whole_card_leaves_memory_to_the_default() -> None:
    (request,) = plan_claim(_plan({"nvidia.com/gpu": "1"}), CARDS).requests
    assert request.exactly is not None and "memory" not in request.exactly.capacity


def test_card_choices_become_selectors_and_numa_binding_a_constraint() -> None:
    annotations = {
        "nvidia.com/use-gputype": "A100",
        "nvidia.com/nouse-gpuuuid": "GPU-3",
        "nvidia.com/numa-bind": "true",
    }
    claim = plan_claim(
        _plan({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "1000"}, annotations), CARDS
    )
    exactly = claim.requests[0].exactly
    assert exactly is not None and exactly.selectors == (
        'device.attributes["gpu.vgpu.io"].productName in ["NVIDIA A100-SXM4-80GB"]',
        '!(device.attributes["gpu.vgpu.io"].uuid in ["GPU-3"])',
    )
    assert claim.constraints == (
        DeviceConstraint(("main",), match_attribute="gpu.vgpu.io/numaNode"),
    )


def test_a_mig_only_request_cannot_be_a_claim() -> None:
    plan = _plan({"nvidia.com/gpu": "1"}, {"nvidia.com/vgpu-mode": "mig"})
    with pytest.raises(DomainError, match="asks for mig cards"):
        plan_claim(plan, CARDS)


def test_the_claim_of_a_percentage_allocates_on_its_card_size() -> None:
    plan = _plan({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"})
    claim = plan_claim(plan, CARDS)
    cards = [GpuCard("GPU-2", 0, "NVIDIA T4", 16384)]
    allocator = Allocator([node_slice("t4", [gpu_device(c) for c in cards])], [gpu_device_class()])
    explanation = explain_claims("ml/p", [claim], allocator, [])
    assert explanation.allocation is not None
    (result,) = explanation.allocation.results[0].results
    assert result.request == "main/card-16384mi" and result.consumed_capacity["memory"] == 8 * GI


def test_a_pod_names_its_claims_and_those_made_from_its_templates() -> None:
    pod = pod_from_manifest(
        {
            "metadata": {"name": "p", "namespace": "ml"},
            "spec": {
                "containers": [{"name": "main"}],
                "resourceClaims": [
                    {"name": "shared", "resourceClaimName": "team-gpu"},
                    {"name": "own", "resourceClaimTemplateName": "small"},
                    {"name": "later", "resourceClaimTemplateName": "small"},
                ],
            },
            "status": {"resourceClaimStatuses": [{"name": "own", "resourceClaimName": "p-own-x7"}]},
        }
    )
    assert pod.claims == (
        PodClaim("shared", "team-gpu"),
        PodClaim("own", "p-own-x7", "small"),
        PodClaim("later", "", "small"),
    )
