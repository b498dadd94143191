"""Consumable capacity: what a request consumes of a device, as kube-scheduler computes it
(`consumable_capacity.go` of k8s.io/dynamic-resource-allocation, integer arithmetic).

- A capacity the request does not name consumes the policy's `default`, or the whole value
  when there is no default.
- A named amount is rounded up: below `validRange.min` to `min`, then to `min + n * step`; or
  to the first of `validValues` at least as large (kept as asked when none is).
- The rounded amount violates the policy above `max`, off the step grid, or outside the
  valid values (the default always passes); the device then cannot serve the request.
- It fits when what is already allocated plus what this allocation is taking plus it stays
  within the capacity's value (`consumption`, then `shortfall`: kube-scheduler's
  `cmpRequestOverCapacity` in two steps, the first depending only on request and device).

Names: a request or device may spell a capacity `memory` or `<driver>/memory`; both mean the
driver's own. Internally every capacity is keyed by its qualified name.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from vgpu.domain.dra.model import DeviceCapacity, RequestPolicy, ValidRange
from vgpu.domain.errors import DomainError

INT64_MAX = 2**63 - 1


class CapacityError(DomainError):
    """A capacity request no device can be checked against (it names one capacity twice, or
    rounds past 2^63 - 1): kube-scheduler aborts the allocation instead of trying the next
    device."""


@dataclass(frozen=True, slots=True)
class Capacity:
    """A device's capacity under its qualified name, with the name its slice spells it by
    (what the claim's `consumedCapacity` uses)."""

    qualified: str
    published: str
    value: int
    policy: RequestPolicy | None


@dataclass(frozen=True, slots=True)
class Shortfall:
    """Why a device cannot serve a request's capacities: the capacity (qualified name) and
    `kind` (`missing`: the device has none of that name; `policy`: the rounded amount breaks
    its request policy; `insufficient`: not enough left), with the amounts."""

    capacity: str
    kind: str
    asked: int = 0
    consumed: int = 0
    free: int = 0
    value: int = 0


def qualified(name: str, driver: str) -> str:
    """`memory` of driver `gpu.vgpu.io` is `gpu.vgpu.io/memory`."""
    return name if "/" in name else f"{driver}/{name}"


def device_capacities(capacity: Mapping[str, DeviceCapacity], driver: str) -> dict[str, Capacity]:
    """A device's capacities by qualified name, each once: when a device publishes both
    `memory` and `<driver>/memory`, the explicit one wins (as attribute lookups do)."""
    resolved: dict[str, Capacity] = {}
    prefix = f"{driver}/"
    for name, cap in capacity.items():
        if name.startswith(prefix):
            resolved[name] = Capacity(name, name, cap.value, cap.policy)
    for name, cap in capacity.items():
        key = qualified(name, driver)
        if key not in resolved:
            resolved[key] = Capacity(key, name, cap.value, cap.policy)
    return resolved


def resolve_requests(
    requests: Mapping[str, int], driver: str, capacities: Mapping[str, Capacity]
) -> dict[str, int] | str:
    """The requested amounts by the qualified name of the device capacity they refer to, or
    the first requested name the device does not have. CapacityError when two spellings of
    one capacity are both requested."""
    resolved: dict[str, int] = {}
    for name, amount in requests.items():
        key = qualified(name, driver)  # another domain's name matches only as published
        if key not in capacities:
            return name
        if key in resolved:
            raise CapacityError(f"capacity {key!r} is requested twice (as {name!r} and another)")
        resolved[key] = amount
    return resolved


def consumed_quantity(requested: int | None, value: int, policy: RequestPolicy | None) -> int:
    """What a request of `requested` (None: not named) consumes of a capacity of `value`.

    >>> policy = RequestPolicy(default=4, valid_range=ValidRange(min=2, max=8, step=2))
    >>> [consumed_quantity(r, 10, policy) for r in (None, 1, 3, 4, 9)]
    [4, 2, 4, 4, 10]
    >>> consumed_quantity(5, 10, RequestPolicy(valid_values=(2, 6)))
    6
    """
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else value
    if policy is None:
        return requested
    if policy.valid_range is not None:
        return round_up_range(requested, policy.valid_range)
    if policy.valid_values:
        return next((v for v in policy.valid_values if requested <= v), requested)
    return requested


def round_up_range(requested: int, valid: ValidRange) -> int:
    """`requested` raised to `min`, then up to the next `min + n * step`."""
    if requested < valid.min:
        return valid.min
    if valid.step is None:
        return requested
    steps = -(-(requested - valid.min) // valid.step)
    rounded = valid.min + steps * valid.step
    if rounded > INT64_MAX:
        raise CapacityError(f"a request of {requested} rounds up past {INT64_MAX}")
    return rounded


def violates_policy(consumed: int, policy: RequestPolicy | None) -> bool:
    """Whether `consumed` (already rounded) is outside what the policy allows."""
    if policy is None or (policy.default is not None and consumed == policy.default):
        return False
    valid = policy.valid_range
    if valid is not None:
        if valid.max is not None and consumed > valid.max:
            return True
        return valid.step is not None and (consumed - valid.min) % valid.step != 0
    if policy.valid_values:
        return consumed not in policy.valid_values
    return False


@dataclass(frozen=True, slots=True)
class Consumption:
    """What a request consumes of every capacity of one device (qualified names), and the
    amounts it named (before rounding). It depends only on the request and the device."""

    amounts: dict[str, int]
    asked: dict[str, int]


def consumption(
    requests: Mapping[str, int], driver: str, capacities: Mapping[str, Capacity]
) -> Consumption | Shortfall:
    """What the request would consume of the device, or why the device can never serve it
    (a capacity it lacks, an amount its request policy refuses). CapacityError for a request
    no device can be checked against."""
    resolved = resolve_requests(requests, driver, capacities)
    if isinstance(resolved, str):
        return Shortfall(qualified(resolved, driver), "missing", requests[resolved])
    amounts = {}
    for key, cap in capacities.items():
        amount = consumed_quantity(resolved.get(key), cap.value, cap.policy)
        if violates_policy(amount, cap.policy):
            return Shortfall(key, "policy", resolved.get(key, amount), amount, value=cap.value)
        amounts[key] = amount
    return Consumption(amounts, resolved)


def shortfall(
    consumed: Consumption,
    capacities: Mapping[str, Capacity],
    allocated: Mapping[str, int],
    allocating: Mapping[str, int],
) -> Shortfall | None:
    """The first capacity that cannot take `consumed` on top of what allocated claims hold
    (`allocated`) and this allocation has taken so far (`allocating`); None when all can."""
    for key, amount in consumed.amounts.items():
        held = allocated.get(key, 0) + allocating.get(key, 0)
        value = capacities[key].value
        if held + amount > value:
            asked = consumed.asked.get(key, amount)
            return Shortfall(key, "insufficient", asked, amount, max(value - held, 0), value)
    return None
