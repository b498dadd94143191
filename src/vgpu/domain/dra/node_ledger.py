"""The DRA driver's own count of each GPU on its node, so no card is ever promised past its
memory or compute, whatever the scheduler (or a second scheduler, or a scheduler without
consumable capacity) decided.

What holds a card:

- every claim this driver prepared and has not unprepared (its record), by what each share
  consumes, memory counted in whole MiB rounded up;
- every pod the device plugin served on this node that is still running: what the plugin's
  served record says it served, else what the kubelet's device checkpoint says the pod was
  given. A node can move from device-plugin mode to DRA mode with such pods running: they keep
  their slices until they end.

Admin-access shares hold nothing. Only memory and cores are bounded: DRA has no split count.
Compute follows HAMi's two rules, which capacity alone cannot say: a share of 0 cores has no
compute limit (it consumes no cores), so it never joins a GPU whose cores are all held; and a
share of all the cores wants the GPU to itself (nothing else may hold it, as a 0-core share
there would run unthrottled beside it).

>>> card = GpuCard("GPU-a", 0, "NVIDIA A100", memory_mib=40960)
>>> held = [GpuHolder("pod ml/old (device plugin)", {"GPU-a": Usage(1, 30000, 50)})]
>>> share = DeviceShare("gpu", "n", "gpu-0", "s", "GPU-a", 20000 * 2**20, 30)
>>> print(over_capacity("ml/new", [share], {"GPU-a": card}, held))
claim ml/new: GPU GPU-a (gpu-0) would be over capacity: the claim needs 20000 MiB and 30% \
cores, 30000 MiB and 50% are held (pod ml/old (device plugin)), the GPU has 40960 MiB and 100%
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vgpu.domain.device import IDLE, Usage
from vgpu.domain.dra.gpu import GpuCard
from vgpu.domain.dra.limits import DeviceShare


@dataclass(frozen=True, slots=True)
class GpuHolder:
    """Something that holds part of the node's GPUs: `who` for people, what per GPU uuid."""

    who: str
    footprint: Mapping[str, Usage]


def shares_footprint(shares: Sequence[DeviceShare]) -> dict[str, Usage]:
    """What `shares` hold per GPU uuid (a share is one slice; admin access holds nothing)."""
    total: dict[str, Usage] = {}
    for share in shares:
        if not share.admin:
            held = Usage(1, share.charged_mib, share.cores)
            total[share.uuid] = total.get(share.uuid, IDLE) + held
    return total


def device_plugin_holders(
    live: Mapping[str, str],
    served: Mapping[str, Mapping[str, Usage]],
    checkpoint: Mapping[str, Mapping[str, Usage]],
) -> list[GpuHolder]:
    """The device plugin's pods still running here (`live`: pod uid to `namespace/name`), each
    by its served record when it has one, else by the kubelet's checkpoint."""
    found = []
    for uid, key in live.items():
        if uid in served:
            found.append(GpuHolder(f"pod {key} (served by the device plugin)", served[uid]))
        elif uid in checkpoint:
            who = f"pod {key} (in the kubelet's device checkpoint)"
            found.append(GpuHolder(who, checkpoint[uid]))
    return found


def over_capacity(
    claim: str,
    shares: Sequence[DeviceShare],
    cards: Mapping[str, GpuCard],
    holders: Sequence[GpuHolder],
) -> str | None:
    """Why preparing `claim`'s `shares` would take a GPU (`cards` by uuid) past its memory or
    cores with what `holders` hold; None when everything fits."""
    needed = shares_footprint(shares)
    for uuid, amount in needed.items():
        card = cards[uuid]
        held = IDLE
        names = []
        for holder in holders:
            if uuid in holder.footprint:
                held = held + holder.footprint[uuid]
                names.append(holder.who)
        after = held + amount
        by = ", ".join(names) if names else "nothing"
        gpu = f"GPU {uuid} ({next(s.device for s in shares if s.uuid == uuid)})"
        if after.memory > card.memory_mib or after.cores > card.cores:
            return (
                f"claim {claim}: {gpu} would be over capacity: the claim needs "
                f"{amount.memory} MiB and {amount.cores}% cores, {held.memory} MiB and "
                f"{held.cores}% are held ({by}), the GPU has {card.memory_mib} MiB and "
                f"{card.cores}%"
            )
        if amount.cores == 0 and card.cores > 0 and held.cores >= card.cores:
            return (
                f"claim {claim}: {gpu}: its compute is all held ({held.cores}% by {by}), and "
                "a share with no compute limit (cores 0) would run beside it unthrottled"
            )
        if amount.cores >= card.cores and held.slices > 0:
            return (
                f"claim {claim}: {gpu}: the claim takes all its compute ({amount.cores}%), "
                f"which needs the GPU to itself, and it is held ({by})"
            )
    return None
