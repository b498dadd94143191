"""The rules kube-apiserver enforces on a ResourceSlice beyond its schema, checked before the
driver writes one, so a slice the API server would refuse is a clear log line instead of a
failed write in a loop.

They follow the API server's validation of `resource.k8s.io/v1` (Kubernetes 1.34 to 1.36):
names (driver, pool, node, devices, attributes and capacities), the limits (128 devices per
slice, 32 attributes and capacities per device, 64 characters per string attribute), and the
consumable-capacity rules for a capacity's `requestPolicy` (only on a device that allows
multiple allocations; `validValues` or `validRange`, not both, with a `default` they accept;
`validValues` ascending, unique, at most 10 and none above the capacity; `min`, `max` and
`default` within the capacity and each other, `step` dividing `default - min` and
`max - min`, and `min + step` within the capacity).

>>> from vgpu.domain.dra.model import DeviceCapacity, ValidRange
>>> cores = DeviceCapacity(100, RequestPolicy(default=50, valid_range=ValidRange(0, 99, 3)))
>>> device = Device("gpu-0", capacity={"cores": cores}, allow_multiple_allocations=True)
>>> pool = ResourcePool("n1")
>>> for problem in slice_problems(ResourceSlice("n1-gpu", "gpu.vgpu.io", pool, "n1", (device,))):
...     for part in problem.split(": "):
...         print(part)
spec.devices[0].capacity[cores].requestPolicy.validRange.step
3
the default 50 is not min 0 plus a whole number of steps
"""

import re
from collections.abc import Iterator

from vgpu.domain.dra.model import (
    Device,
    DeviceCapacity,
    RequestPolicy,
    ResourcePool,
    ResourceSlice,
    Version,
)

MAX_DEVICES = 128
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_ATTRIBUTE_TEXT = 64
MAX_VALID_VALUES = 10
MAX_DRIVER_NAME = 63
MAX_POOL_NAME = 253
MAX_IDENTIFIER = 32

_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = r"(0|[1-9][0-9]*)"
_PRERELEASE = r"(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
_SEMVER = re.compile(
    rf"{_NUMBER}\.{_NUMBER}\.{_NUMBER}(-{_PRERELEASE}(\.{_PRERELEASE})*)?(\+{_BUILD}(\.{_BUILD})*)?"
)


def slice_problems(slice_: ResourceSlice) -> list[str]:
    """Every rule `slice_` breaks, each as `path: value: why`; empty when the API server would
    accept it."""
    return list(_slice(slice_))


def _slice(slice_: ResourceSlice) -> Iterator[str]:
    yield from _subdomain("metadata.name", slice_.name, 253)
    yield from _driver_name("spec.driver", slice_.driver)
    yield from _pool(slice_.pool)
    if slice_.node_name is not None and slice_.all_nodes:
        yield "spec: {nodeName, allNodes}: exactly one of nodeName, allNodes may be set"
    elif slice_.node_name is None and not slice_.all_nodes:
        yield "spec: (none): exactly one of nodeName, allNodes is required"
    if slice_.node_name is not None:
        yield from _subdomain("spec.nodeName", slice_.node_name, 253)
    if len(slice_.devices) > MAX_DEVICES:
        yield f"spec.devices: {len(slice_.devices)} devices: at most {MAX_DEVICES} per slice"
        return  # the API server stops here too: a list this long is not looked into
    seen: set[str] = set()
    for i, device in enumerate(slice_.devices):
        if device.name in seen:
            yield f"spec.devices[{i}].name: {device.name!r}: is a duplicate"
        seen.add(device.name)
        yield from _device(f"spec.devices[{i}]", device)


def _pool(pool: ResourcePool) -> Iterator[str]:
    if not pool.name:
        yield "spec.pool.name: '': is required"
    elif len(pool.name) > MAX_POOL_NAME:
        yield f"spec.pool.name: {pool.name[:40]!r}...: is longer than {MAX_POOL_NAME} characters"
    else:
        for part in pool.name.split("/"):
            yield from _subdomain("spec.pool.name", part, 253)
    if pool.resource_slice_count <= 0:
        yield f"spec.pool.resourceSliceCount: {pool.resource_slice_count}: must be above zero"
    if pool.generation < 0:
        yield f"spec.pool.generation: {pool.generation}: must not be negative"


def _device(at: str, device: Device) -> Iterator[str]:
    if len(device.name) > 63 or not _LABEL.fullmatch(device.name):
        yield (
            f"{at}.name: {device.name!r:.80}: is not a DNS label (lower-case letters, digits "
            "and '-', at most 63 characters)"
        )
    total = len(device.attributes) + len(device.capacity)
    if total > MAX_ATTRIBUTES_AND_CAPACITIES:
        yield (
            f"{at}: {total} attributes and capacities: at most "
            f"{MAX_ATTRIBUTES_AND_CAPACITIES} per device"
        )
    for name, value in device.attributes.items():
        where = f"{at}.attributes[{name}]"
        yield from _qualified_name(where, name)
        text = value.text if isinstance(value, Version) else value
        if isinstance(text, str) and len(text) > MAX_ATTRIBUTE_TEXT:
            yield f"{where}: {text[:40]!r}...: is longer than {MAX_ATTRIBUTE_TEXT} characters"
        if isinstance(value, Version) and not _SEMVER.fullmatch(value.text):
            yield f"{where}: {value.text!r:.80}: is not a semantic version (semver.org 2.0.0)"
    for name, capacity in device.capacity.items():
        where = f"{at}.capacity[{name}]"
        yield from _qualified_name(where, name)
        if capacity.policy is None:
            continue
        if not device.allow_multiple_allocations:
            yield f"{where}.requestPolicy: (set): needs allowMultipleAllocations: true"
        else:
            yield from _policy(f"{where}.requestPolicy", capacity, capacity.policy)


def _policy(at: str, capacity: DeviceCapacity, policy: RequestPolicy) -> Iterator[str]:
    value = capacity.value
    if policy.valid_values and policy.valid_range is not None:
        yield f"{at}: (both): validValues and validRange may not both be set"
        return
    if policy.valid_values:
        if policy.default is None:
            yield f"{at}.default: (none): is required with validValues"
            return
        yield from _valid_values(f"{at}.validValues", value, policy.default, policy.valid_values)
    elif policy.valid_range is not None:
        if policy.default is None:
            yield f"{at}.default: (none): is required with validRange"
            return
        where, limits, default = f"{at}.validRange", policy.valid_range, policy.default
        if limits.min > value:
            yield f"{where}.min: {limits.min}: is above the capacity {value}"
        if default < limits.min:
            yield f"{where}.min: {limits.min}: is above the default {default}"
        if limits.max is not None:
            if limits.min > limits.max:
                yield f"{where}.max: {limits.max}: is below min {limits.min}"
            if limits.max > value:
                yield f"{where}.max: {limits.max}: is above the capacity {value}"
            if default > limits.max:
                yield f"{where}.max: {limits.max}: is below the default {default}"
        if limits.step is not None:
            yield from _step(f"{where}.step", value, default, limits.min, limits.max, limits.step)


def _valid_values(at: str, value: int, default: int, values: tuple[int, ...]) -> Iterator[str]:
    if len(values) > MAX_VALID_VALUES:
        yield f"{at}: {len(values)} values: at most {MAX_VALID_VALUES}"
        return
    for i in range(1, len(values)):
        if values[i - 1] > values[i]:
            yield f"{at}[{i}]: {values[i]}: values must be in ascending order"
    seen: set[int] = set()
    for i, option in enumerate(values):
        if option in seen:
            yield f"{at}[{i}]: {option}: is a duplicate"
        seen.add(option)
        if option > value:
            yield f"{at}[{i}]: {option}: is above the capacity {value}"
    if default not in seen:
        yield f"{at}: default {default}: is not one of the valid values"


def _step(
    at: str, value: int, default: int, low: int, high: int | None, step: int
) -> Iterator[str]:
    if step <= 0:
        yield f"{at}: {step}: must be positive"
        return
    if low + step > value:
        yield f"{at}: {step}: min {low} plus one step is above the capacity {value}"
    if (default - low) % step:
        yield f"{at}: {step}: the default {default} is not min {low} plus a whole number of steps"
    if high is not None and (high - low) % step:
        yield f"{at}: {step}: max {high} is not min {low} plus a whole number of steps"


def _qualified_name(at: str, name: str) -> Iterator[str]:
    domain, slash, identifier = name.rpartition("/")
    if not identifier:
        yield f"{at}: {name!r:.80}: the name after the domain is empty"
    elif len(identifier) > MAX_IDENTIFIER or not _C_IDENTIFIER.fullmatch(identifier):
        yield (
            f"{at}: {name!r:.80}: {identifier!r:.40} is not a C identifier of at most "
            f"{MAX_IDENTIFIER} characters"
        )
    if slash:
        if not domain:
            yield f"{at}: {name!r:.80}: the domain before '/' is empty"
        else:
            yield from _driver_name(at, domain)


def _driver_name(at: str, name: str) -> Iterator[str]:
    """A driver name, or a qualified name's domain: a DNS subdomain of at most 63 characters
    (upper-case letters allowed, as for a CSI driver)."""
    if not name:
        yield f"{at}: '': is required"
    elif len(name) > MAX_DRIVER_NAME:
        yield f"{at}: {name[:40]!r}...: is longer than {MAX_DRIVER_NAME} characters"
    else:
        yield from _subdomain(at, name.lower(), MAX_DRIVER_NAME)


def _subdomain(at: str, name: str, limit: int) -> Iterator[str]:
    if not name:
        yield f"{at}: '': is required"
    elif len(name) > limit:
        yield f"{at}: {name[:40]!r}...: is longer than {limit} characters"
    elif not _SUBDOMAIN.fullmatch(name):
        yield (
            f"{at}: {name!r:.80}: is not a DNS subdomain (lower-case letters, digits, '-' and "
            "'.', starting and ending with a letter or digit)"
        )
