"""What the allocator answers: an allocation per claim, or why the claims cannot be
allocated on a node, down to each device and request."""

from dataclasses import dataclass
from enum import StrEnum

from vgpu.domain.dra.allocated import DeviceId
from vgpu.domain.dra.capacity import Capacity
from vgpu.domain.dra.model import AllocationResult
from vgpu.domain.dra.write import quantity_text


class DeviceProblem(StrEnum):
    """Why a device cannot serve a request (on its own, as the cluster is now)."""

    CLASS = "class selector"
    SELECTOR = "request selector"
    IN_USE = "allocated"
    NO_CAPACITY = "missing capacity"
    POLICY = "request policy"
    INSUFFICIENT = "insufficient capacity"


@dataclass(frozen=True, slots=True)
class DeviceVerdict:
    """Whether one device could serve one request of one claim on its own (`problem` None)
    or why not, in a sentence; for capacity problems the capacity (qualified name) and how
    much is missing (`short`, in its unit)."""

    claim: str
    request: str
    device: DeviceId
    problem: DeviceProblem | None
    sentence: str
    capacity: str = ""
    short: int = 0


@dataclass(frozen=True, slots=True)
class Allocation:
    """Every claim allocated on `node`: one AllocationResult per claim, in order."""

    node: str
    results: tuple[AllocationResult, ...]


@dataclass(frozen=True, slots=True)
class CannotAllocate:
    """The claims cannot all be allocated on `node`.

    `problem` is set when allocation stopped with an error (an unknown class, a selector
    that fails, an incomplete pool for `All`, too many devices), as kube-scheduler's
    allocator returns one; otherwise no combination of devices serves every request.
    `verdicts` says, for each request and device, whether the device could serve the request
    alone; `unmet` names the requests that fewer devices could serve than they need.
    """

    node: str
    problem: str = ""
    verdicts: tuple[DeviceVerdict, ...] = ()
    unmet: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        """One line: the error, or the requests that cannot be served, or the combination."""
        if self.problem:
            return self.problem
        if self.unmet:
            return "; ".join(self.unmet)
        return "the devices that could serve each request alone cannot serve them all together"


AllocationOutcome = Allocation | CannotAllocate
"""What the allocator answers for a node: an allocation, or why there is none."""


def amount_text(capacity: str, value: int) -> str:
    """An amount as people read it: memory-like capacities as quantities (`20Gi`)."""
    return quantity_text(value) if capacity.endswith("memory") else str(value)


def policy_text(capacity: str, cap: Capacity) -> str:
    policy = cap.policy
    if policy is None:
        return "none"
    parts = []
    if policy.valid_range is not None:
        valid = policy.valid_range
        parts.append(f"from {amount_text(capacity, valid.min)}")
        if valid.max is not None:
            parts.append(f"to {amount_text(capacity, valid.max)}")
        if valid.step is not None:
            parts.append(f"in steps of {amount_text(capacity, valid.step)}")
    elif policy.valid_values:
        parts.append("one of " + ", ".join(amount_text(capacity, v) for v in policy.valid_values))
    return " ".join(parts) or "none"
