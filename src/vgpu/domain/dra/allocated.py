"""What allocated claims already hold, as kube-scheduler's DRA plugin counts it
(`allocateddevices.go`): a result with a share id holds part of a shared device (its
`consumedCapacity`, summed over every share); one without holds its device whole; an
`adminAccess` result holds nothing (admin access sees devices without taking them).
"""

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from vgpu.domain.dra.capacity import qualified
from vgpu.domain.dra.model import DeviceRequestAllocationResult, ResourceClaim


class DeviceId(NamedTuple):
    """A device by driver, pool and name: unique in a cluster."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"

    @classmethod
    def of(cls, result: DeviceRequestAllocationResult) -> "DeviceId":
        """The device an allocation result names."""
        return cls(result.driver, result.pool, result.device)


_NONE: Mapping[str, int] = {}


class AllocatedDevices:
    """The devices allocated claims hold, kept up to date claim by claim (`add`, `remove`).

    Claims are keyed by `namespace/name`; adding a claim again replaces what it held, and a
    claim without an allocation holds nothing.
    """

    def __init__(self, claims: Iterable[ResourceClaim] = ()) -> None:
        self._whole: dict[DeviceId, set[str]] = {}
        self._consumed: dict[DeviceId, dict[str, int]] = {}
        self._sharers: dict[DeviceId, set[str]] = {}
        self._held: dict[str, tuple[DeviceRequestAllocationResult, ...]] = {}
        for claim in claims:
            self.add(claim)

    def add(self, claim: ResourceClaim) -> None:
        """Count what `claim` holds (nothing when it is not allocated)."""
        self.remove(claim.key)
        if claim.allocation is None:
            return
        held = tuple(r for r in claim.allocation.results if not r.admin_access)
        self._held[claim.key] = held
        for result in held:
            device = DeviceId.of(result)
            if result.share_id is None:
                self._whole.setdefault(device, set()).add(claim.key)
                continue
            self._sharers.setdefault(device, set()).add(claim.key)
            consumed = self._consumed.setdefault(device, {})
            for name, amount in result.consumed_capacity.items():
                key = qualified(name, result.driver)
                consumed[key] = consumed.get(key, 0) + amount

    def remove(self, claim: str) -> None:
        """Forget what the claim `namespace/name` held."""
        for result in self._held.pop(claim, ()):
            device = DeviceId.of(result)
            if result.share_id is None:
                _discard(self._whole, device, claim)
                continue
            _discard(self._sharers, device, claim)
            consumed = self._consumed.get(device, {})
            for name, amount in result.consumed_capacity.items():
                key = qualified(name, result.driver)
                consumed[key] = consumed.get(key, 0) - amount
            if device not in self._sharers:
                self._consumed.pop(device, None)

    def in_use(self, device: DeviceId) -> bool:
        """Whether a claim holds the device whole."""
        return device in self._whole

    def consumed(self, device: DeviceId) -> Mapping[str, int]:
        """What the shares of the device hold, by qualified capacity name."""
        return self._consumed.get(device, _NONE)

    def holders(self, device: DeviceId) -> frozenset[str]:
        """The claims (`namespace/name`) that hold the device or a share of it."""
        return frozenset(self._whole.get(device, ())) | frozenset(self._sharers.get(device, ()))


def _discard(index: dict[DeviceId, set[str]], device: DeviceId, claim: str) -> None:
    holders = index.get(device)
    if holders is not None:
        holders.discard(claim)
        if not holders:
            del index[device]
