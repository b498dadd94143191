"""From a claim's allocation to what HAMi-core must enforce on this node: for every device of
the driver allocated to the claim, the GPU behind it and the memory and compute share it got.

The kubelet asks a driver to prepare a claim only on the node the claim was allocated to, but
the claim is read back from the API and checked here anyway: it must be allocated, to this
node, with devices of this driver in this node's pool that name GPUs the node publishes. What a
device result consumes (`consumedCapacity`, see `gpu_share`) becomes the container's limits;
a result without it (a scheduler without consumable capacity allocated the device whole) takes
the whole card.

A result with `adminAccess` gets its GPU without limits (for monitoring and debugging tools;
the API server lets only namespaces an administrator marked ask for it) and consumes nothing.
A claim that mixes admin and limited devices is refused: its containers would get HAMi-core on
the admin devices too.

>>> card = GpuCard("GPU-a", 0, "NVIDIA A100", memory_mib=40960)
>>> result = DeviceRequestAllocationResult("gpu", "gpu.vgpu.io", "node-a", "gpu-0",
...     share_id="s1", consumed_capacity={"memory": 4096 * MIB, "cores": 30})
>>> claim = ResourceClaim("c", "ml", "u1", allocation=AllocationResult((result,), "node-a"))
>>> share = claim_shares(claim, "gpu.vgpu.io", "node-a", {"gpu-0": card})[0]
>>> share.uuid, share.limit_mib, share.cores, share.dir_name
('GPU-a', 4096, 30, 's1')
"""

from collections.abc import Mapping
from dataclasses import dataclass

from vgpu.domain.dra.gpu import MIB, GpuCard, GpuShare, gpu_share
from vgpu.domain.dra.model import AllocationResult, DeviceRequestAllocationResult, ResourceClaim
from vgpu.domain.errors import DomainError, DraError


class ClaimRefused(DomainError):
    """A claim this node cannot prepare; the message says which claim, which device, why."""


@dataclass(frozen=True, slots=True)
class DeviceShare:
    """One device result of the driver, prepared on this node: which request it serves, the
    GPU, and what it consumes (`memory_bytes`, `cores`; admin access consumes nothing)."""

    request: str
    pool: str
    device: str
    share_id: str | None
    uuid: str
    memory_bytes: int
    cores: int
    admin: bool = False

    @property
    def limit_mib(self) -> int:
        """HAMi-core's memory limit: whole MiB, never more than consumed."""
        return self.memory_bytes // MIB

    @property
    def charged_mib(self) -> int:
        """What the node's ledger counts: whole MiB, never less than consumed."""
        return -(-self.memory_bytes // MIB)

    @property
    def dir_name(self) -> str:
        """The share's directory under the claim's: its share id, else the device name."""
        return self.share_id or self.device

    @property
    def request_name(self) -> str:
        """The claim's request the device serves (`req` of `req/subrequest`), as the kubelet
        names it."""
        return self.request.partition("/")[0]


def claim_shares(
    claim: ResourceClaim, driver: str, node: str, cards: Mapping[str, GpuCard]
) -> tuple[DeviceShare, ...]:
    """The devices of `driver` allocated to `claim` on `node`, in the allocation's order;
    `cards` are the GPUs the node publishes, by device name. ClaimRefused says why not."""
    allocation = claim.allocation
    if allocation is None:
        raise ClaimRefused(f"claim {claim.key} is not allocated (no status.allocation)")
    if allocation.node_name is not None and allocation.node_name != node:
        raise ClaimRefused(
            f"claim {claim.key} is allocated to node {allocation.node_name}, not to {node}"
        )
    ours = _results(claim, allocation, driver)
    shares = tuple(_share(claim, r, driver, node, cards) for r in ours)
    if len({s.admin for s in shares}) > 1:
        raise ClaimRefused(
            f"claim {claim.key} mixes adminAccess devices and limited devices of {driver}: "
            "its containers cannot have HAMi-core on some GPUs and not on others; use one "
            "claim for each"
        )
    return shares


def _results(
    claim: ResourceClaim, allocation: AllocationResult, driver: str
) -> list[DeviceRequestAllocationResult]:
    ours = [r for r in allocation.results if r.driver == driver]
    if not ours:
        drivers = sorted({r.driver for r in allocation.results}) or ["none"]
        raise ClaimRefused(
            f"claim {claim.key} has no device of driver {driver} (its devices are from: "
            f"{', '.join(drivers)})"
        )
    return ours


def _share(
    claim: ResourceClaim,
    result: DeviceRequestAllocationResult,
    driver: str,
    node: str,
    cards: Mapping[str, GpuCard],
) -> DeviceShare:
    where = f"claim {claim.key}, request {result.request!r}, device {result.pool}/{result.device}"
    if result.pool != node:
        raise ClaimRefused(f"{where}: the pool is not this node's ({node})")
    card = cards.get(result.device)
    if card is None:
        published = ", ".join(sorted(cards)) or "none"
        raise ClaimRefused(
            f"{where}: not a GPU this node publishes (published: {published}); the GPU may "
            "have failed or gone since the claim was allocated"
        )
    share = _consumed(claim, result, driver, card)
    if share is None:
        return DeviceShare(
            result.request, result.pool, result.device, result.share_id, card.uuid, 0, 0, True
        )
    if share.memory_bytes < MIB:
        raise ClaimRefused(
            f"{where}: consumes {share.memory_bytes} bytes of memory, less than HAMi-core's "
            "unit of 1 MiB (a limit of 0 would mean no limit at all)"
        )
    if share.memory_bytes > card.memory_mib * MIB:
        raise ClaimRefused(
            f"{where}: consumes {share.memory_bytes} bytes of memory, more than the GPU's "
            f"{card.memory_mib} MiB"
        )
    if share.cores > card.cores:
        raise ClaimRefused(
            f"{where}: consumes {share.cores}% cores, more than the GPU's {card.cores}%"
        )
    return DeviceShare(
        result.request,
        result.pool,
        result.device,
        result.share_id,
        card.uuid,
        share.memory_bytes,
        share.cores,
    )


def _consumed(
    claim: ResourceClaim, result: DeviceRequestAllocationResult, driver: str, card: GpuCard
) -> GpuShare | None:
    """What the result consumes; None for admin access (nothing)."""
    if result.admin_access:
        return None
    if not result.consumed_capacity:
        return GpuShare(card.memory_mib * MIB, card.cores)
    try:
        return gpu_share(result, driver)
    except DraError as exc:
        raise ClaimRefused(f"claim {claim.key}: {exc}") from None
