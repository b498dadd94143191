"""The API server's ResourceSlice rules, checked before the driver writes a slice."""

import doctest
from dataclasses import replace

import pytest

from vgpu.domain.dra import (
    Device,
    DeviceCapacity,
    GpuCard,
    RequestPolicy,
    ResourcePool,
    ResourceSlice,
    ValidRange,
    Version,
    gpu_device,
    node_slice,
    slice_rules,
)
from vgpu.domain.dra.slice_rules import slice_problems

CARD = GpuCard("GPU-a", 0, "NVIDIA A100-SXM4-80GB", memory_mib=81920, architecture="Ampere",
               driver_version="535.104.05")


def _slice(*devices: Device, **changes: object) -> ResourceSlice:
    base = node_slice("gpu-node-1", devices or (gpu_device(CARD),))
    return replace(base, **changes)  # type: ignore[arg-type]


def _cores(policy: RequestPolicy | None, value: int = 100, shared: bool = True) -> Device:
    return Device("gpu-0", capacity={"cores": DeviceCapacity(value, policy)},
                  allow_multiple_allocations=shared)


def test_the_driver_s_own_slice_of_eight_gpus_breaks_no_rule() -> None:
    devices = [gpu_device(replace(CARD, uuid=f"GPU-{i}", index=i)) for i in range(8)]
    assert slice_problems(_slice(*devices)) == []


def test_hamis_request_policies_hold_for_any_card_of_two_mib_or_more() -> None:
    # memory 1Mi..total step 1Mi default total; cores 0..100 step 1 default 100
    assert slice_problems(_slice(gpu_device(replace(CARD, memory_mib=2)))) == []
    # a 1 MiB card would break `min + step <= value`, as the API server would say
    assert slice_problems(_slice(gpu_device(replace(CARD, memory_mib=1)))) == [
        "spec.devices[0].capacity[memory].requestPolicy.validRange.step: 1048576: min 1048576 "
        "plus one step is above the capacity 1048576"
    ]


@pytest.mark.parametrize(
    ("policy", "value", "problem"),
    [
        (RequestPolicy(50, (10, 50), ValidRange(0, 100, 1)), 100,
         "requestPolicy: (both): validValues and validRange may not both be set"),
        (RequestPolicy(None, valid_range=ValidRange(0, 100, 1)), 100,
         "requestPolicy.default: (none): is required with validRange"),
        (RequestPolicy(None, (10, 20)), 100,
         "requestPolicy.default: (none): is required with validValues"),
        (RequestPolicy(20, (30, 20)), 100,
         "requestPolicy.validValues[1]: 20: values must be in ascending order"),
        (RequestPolicy(20, (20, 20)), 100, "requestPolicy.validValues[1]: 20: is a duplicate"),
        (RequestPolicy(20, (20, 120)), 100,
         "requestPolicy.validValues[1]: 120: is above the capacity 100"),
        (RequestPolicy(25, (20, 30)), 100,
         "requestPolicy.validValues: default 25: is not one of the valid values"),
        (RequestPolicy(1, tuple(range(1, 12))), 100,
         "requestPolicy.validValues: 11 values: at most 10"),
        (RequestPolicy(150, valid_range=ValidRange(120)), 100,
         "requestPolicy.validRange.min: 120: is above the capacity 100"),
        (RequestPolicy(5, valid_range=ValidRange(10)), 100,
         "requestPolicy.validRange.min: 10: is above the default 5"),
        (RequestPolicy(30, valid_range=ValidRange(20, 40)), 30,
         "requestPolicy.validRange.max: 40: is above the capacity 30"),
        (RequestPolicy(50, valid_range=ValidRange(0, 200)), 100,
         "requestPolicy.validRange.max: 200: is above the capacity 100"),
        (RequestPolicy(90, valid_range=ValidRange(0, 80)), 100,
         "requestPolicy.validRange.max: 80: is below the default 90"),
        (RequestPolicy(0, valid_range=ValidRange(0, None, 200)), 100,
         "requestPolicy.validRange.step: 200: min 0 plus one step is above the capacity 100"),
        (RequestPolicy(50, valid_range=ValidRange(0, 99, 3)), 100,
         "requestPolicy.validRange.step: 3: the default 50 is not min 0 plus a whole number of steps"),
        (RequestPolicy(51, valid_range=ValidRange(0, 100, 3)), 100,
         "requestPolicy.validRange.step: 3: max 100 is not min 0 plus a whole number of steps"),
        (RequestPolicy(0, valid_range=ValidRange(0, 100, 0)), 100,
         "requestPolicy.validRange.step: 0: must be positive"),
    ],
)
def test_each_request_policy_rule_names_the_field_and_the_value(
    policy: RequestPolicy, value: int, problem: str
) -> None:
    assert slice_problems(_slice(_cores(policy, value))) == [
        f"spec.devices[0].capacity[cores].{problem}"
    ]


def test_a_range_whose_max_is_below_min_says_so_and_where_the_default_falls() -> None:
    device = _cores(RequestPolicy(60, valid_range=ValidRange(60, 40)))
    assert slice_problems(_slice(device)) == [
        "spec.devices[0].capacity[cores].requestPolicy.validRange.max: 40: is below min 60",
        "spec.devices[0].capacity[cores].requestPolicy.validRange.max: 40: is below the default 60",
    ]


def test_a_request_policy_needs_a_device_that_allows_multiple_allocations() -> None:
    device = _cores(RequestPolicy(100, valid_range=ValidRange(0, 100, 1)), shared=False)
    assert slice_problems(_slice(device)) == [
        "spec.devices[0].capacity[cores].requestPolicy: (set): needs allowMultipleAllocations: true"
    ]
    assert slice_problems(_slice(_cores(None, shared=False))) == []


def test_more_than_128_devices_or_32_attributes_and_capacities_are_refused() -> None:
    many = [replace(gpu_device(CARD), name=f"gpu-{i}") for i in range(129)]
    assert slice_problems(_slice(*many)) == ["spec.devices: 129 devices: at most 128 per slice"]
    device = gpu_device(CARD)  # 7 attributes, 2 capacities
    crowded = replace(device, attributes={**device.attributes, **{f"a{i}": i for i in range(24)}})
    assert slice_problems(_slice(crowded)) == [
        "spec.devices[0]: 33 attributes and capacities: at most 32 per device"
    ]


def test_names_attributes_and_the_pool_follow_the_api_servers_formats() -> None:
    device = replace(
        gpu_device(CARD),
        name="GPU_0",
        attributes={
            "long": "x" * 65,
            "driverVersion": Version("535.104.05"),
            "vgpu.io/fine": 1,
            "bad name": 1,
            "/empty": 1,
            "-bad-.io/x": 1,
            "n" * 33: 1,
        },
    )
    problems = slice_problems(_slice(device, pool=ResourcePool("a/B", -1, 0)))
    assert problems == [
        "spec.pool.name: 'B': is not a DNS subdomain (lower-case letters, digits, '-' and '.', "
        "starting and ending with a letter or digit)",
        "spec.pool.resourceSliceCount: 0: must be above zero",
        "spec.pool.generation: -1: must not be negative",
        "spec.devices[0].name: 'GPU_0': is not a DNS label (lower-case letters, digits and '-', "
        "at most 63 characters)",
        "spec.devices[0].attributes[long]: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'...: is "
        "longer than 64 characters",
        "spec.devices[0].attributes[driverVersion]: '535.104.05': is not a semantic version "
        "(semver.org 2.0.0)",
        "spec.devices[0].attributes[bad name]: 'bad name': 'bad name' is not a C identifier of "
        "at most 32 characters",
        "spec.devices[0].attributes[/empty]: '/empty': the domain before '/' is empty",
        "spec.devices[0].attributes[-bad-.io/x]: '-bad-.io': is not a DNS subdomain (lower-case "
        "letters, digits, '-' and '.', starting and ending with a letter or digit)",
        f"spec.devices[0].attributes[{'n' * 33}]: '{'n' * 33}': '{'n' * 33}' is not a C "
        "identifier of at most 32 characters",
    ]


def test_the_slice_s_placement_and_driver_are_checked() -> None:
    assert slice_problems(_slice(all_nodes=True)) == [
        "spec: {nodeName, allNodes}: exactly one of nodeName, allNodes may be set"
    ]
    assert slice_problems(_slice(node_name=None)) == [
        "spec: (none): exactly one of nodeName, allNodes is required"
    ]
    assert slice_problems(_slice(driver="x" * 64, name="ok")) == [
        "spec.driver: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'...: is longer than 63 characters"
    ]
    # upper case is allowed in a driver name (checked lower-cased, as for a CSI driver)
    assert slice_problems(_slice(driver="GPU.vgpu.io", name="ok")) == []
    two = [gpu_device(CARD), gpu_device(CARD)]
    assert slice_problems(_slice(*two)) == ["spec.devices[1].name: 'gpu-0': is a duplicate"]


def test_the_module_examples_run() -> None:
    result = doctest.testmod(slice_rules)
    assert result.failed == 0 and result.attempted > 0
