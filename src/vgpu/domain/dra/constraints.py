"""Claim constraints, checked as the allocator takes devices and gives them back (in the
reverse order it took them): `matchAttribute` (every device has the attribute, all with one
value) and `distinctAttribute` (every device has it, each with another value). A constraint
with no `requests` applies to all of the claim's requests; one naming `req` applies to its
subrequests too. An attribute named `<driver>/x` is found as `x` on that driver's devices.
"""

from typing import Protocol

from vgpu.domain.dra.model import AttributeValue, Device, ResourceClaim, Version


class Taker(Protocol):
    """The request a device is taken for: its name (`req` or `req/sub`) and `base` (`req`)."""

    @property
    def base(self) -> str: ...

    @property
    def name(self) -> str: ...


class ConstraintError(ValueError):
    """A constraint that names no attribute."""


class Constraint:
    """A claim constraint, checked as devices are taken and given back."""

    def __init__(self, requests: tuple[str, ...], attribute: str) -> None:
        self._requests = frozenset(requests)
        self._attribute = attribute

    def applies(self, wanted: Taker) -> bool:
        requests = self._requests
        return not requests or wanted.base in requests or wanted.name in requests

    def value(self, device: Device, driver: str) -> AttributeValue | None:
        """The device's value of the attribute: by its qualified name, or by its bare name
        when the domain is the device's driver."""
        attributes = device.attributes
        name = self._attribute
        if name in attributes:
            return attributes[name]
        domain, _, identifier = name.partition("/")
        if domain == driver and identifier in attributes:
            return attributes[identifier]
        return None

    def add(self, wanted: Taker, device: Device, driver: str) -> bool:
        raise NotImplementedError

    def remove(self, wanted: Taker) -> None:
        raise NotImplementedError


class _Match(Constraint):
    """`matchAttribute`: every device has the attribute, all with one value."""

    def __init__(self, requests: tuple[str, ...], attribute: str) -> None:
        super().__init__(requests, attribute)
        self._first: tuple[type, object] | None = None
        self._devices = 0

    def add(self, wanted: Taker, device: Device, driver: str) -> bool:
        if not self.applies(wanted):
            return True
        value = self.value(device, driver)
        if value is None:
            return False
        typed = _typed(value)
        if self._devices and typed != self._first:
            return False
        if not self._devices:
            self._first = typed
        self._devices += 1
        return True

    def remove(self, wanted: Taker) -> None:
        if self.applies(wanted):
            self._devices -= 1


class _Distinct(Constraint):
    """`distinctAttribute`: every device has the attribute, each with another value."""

    def __init__(self, requests: tuple[str, ...], attribute: str) -> None:
        super().__init__(requests, attribute)
        self._taken: list[tuple[type, object]] = []

    def add(self, wanted: Taker, device: Device, driver: str) -> bool:
        if not self.applies(wanted):
            return True
        value = self.value(device, driver)
        if value is None or _typed(value) in self._taken:
            return False
        self._taken.append(_typed(value))
        return True

    def remove(self, wanted: Taker) -> None:
        if self.applies(wanted):
            self._taken.pop()


def _typed(value: AttributeValue) -> tuple[type, object]:
    """The value with its type, so that `1`, `True` and `"1"` never compare equal."""
    return (Version, value.text) if isinstance(value, Version) else (type(value), value)


def claim_constraint(claim: ResourceClaim, index: int) -> Constraint:
    constraint = claim.constraints[index]
    if constraint.match_attribute is not None:
        return _Match(constraint.requests, constraint.match_attribute)
    if constraint.distinct_attribute is not None:
        return _Distinct(constraint.requests, constraint.distinct_attribute)
    raise ConstraintError(f"claim {claim.key}, constraint #{index}: empty constraint")
