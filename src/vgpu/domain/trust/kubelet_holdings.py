"""What the kubelet's device checkpoint says a pod holds on this node's cards.

The kubelet keeps, in `kubelet_internal_checkpoint`, every container it gave devices of an
extended resource: pod uid, container, the device ids it chose, and the Allocate answer the
device plugin returned. That file is the kubelet's, on the host, and no tenant writes it, so
it tells which pods really hold GPU slices even when the plugin that served them (HAMi's, or
vgpu's before it kept its own record) left no record and the pod's annotations are unsigned or
edited.

The slices a container holds are read from the answer it was given, HAMi-core's environment:
the cards `NVIDIA_VISIBLE_DEVICES` lists, each with `CUDA_DEVICE_MEMORY_LIMIT_<i>` MiB and
`CUDA_DEVICE_SM_LIMIT` percent of cores. That is what HAMi-core enforces in the container, so it
is neither more nor less than the container can take. When the answer cannot be read that way
(none was kept, a MIG instance, a card this node does not have), the container is counted as
holding the whole of every card its device ids name (`<GPU uuid>-<n>`): too much is safe, too
little would let the card be promised twice.

>>> from vgpu.domain.device import Device
>>> cards = {"GPU-a": Device("GPU-a", 0, "NVIDIA", count=10, memory=32768)}
>>> exact = DeviceAssignment("u1", "main", "nvidia.com/gpu", ("GPU-a-3",),
...     {"NVIDIA_VISIBLE_DEVICES": "GPU-a", "CUDA_DEVICE_MEMORY_LIMIT_0": "3000m",
...      "CUDA_DEVICE_SM_LIMIT": "30"})
>>> holdings_by_pod([exact], "nvidia.com/gpu", cards)["u1"].footprint
{'GPU-a': Usage(slices=1, memory=3000, cores=30)}
>>> unknown = DeviceAssignment("u2", "main", "nvidia.com/gpu", ("GPU-a-4",), None)
>>> held = holdings_by_pod([unknown], "nvidia.com/gpu", cards)["u2"]
>>> held.footprint["GPU-a"].memory, held.guessed
(32768, ('container main: no Allocate answer kept: counted as the whole of GPU-a',))
"""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from vgpu.domain.device import MIG_MODE, Device, Usage
from vgpu.domain.mig.profiles import MAX_MIG_SLICES

_REPLICA = re.compile(r"^(.+)-[0-9]+$")
_HAMI_CORE_MEMORY = re.compile(r"^([0-9]{1,15})([kKmMgG]?)$")
_SM_LIMIT = re.compile(r"^[0-9]{1,6}$")
# HAMi-core's memory suffixes: none = bytes, k = KiB, m = MiB, g = GiB; (multiply, divide) to MiB
_TO_MIB = {"": (1, 2**20), "k": (1, 2**10), "m": (1, 1), "g": (2**10, 1)}
_WHOLE_MIG = (1 << MAX_MIG_SLICES) - 1


@dataclass(frozen=True, slots=True)
class DeviceAssignment:
    """One container's devices of one resource, as the kubelet's checkpoint keeps them.

    `envs`: the environment of the Allocate answer the kubelet kept, None when it kept none or
    it does not read."""

    pod_uid: str
    container: str
    resource: str
    device_ids: tuple[str, ...]
    envs: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class KubeletHolding:
    """What one pod holds per card by the checkpoint; `guessed` says which containers were
    counted as whole cards, and why."""

    pod_uid: str
    footprint: dict[str, Usage] = field(default_factory=dict)
    guessed: tuple[str, ...] = ()


def holdings_by_pod(
    assignments: Iterable[DeviceAssignment], resource: str, cards: Mapping[str, Device]
) -> dict[str, KubeletHolding]:
    """By pod uid, what the pods the checkpoint lists hold of `resource` on `cards`.

    A pod's containers are added up (the checkpoint does not tell init containers apart, so a
    GPU init container is counted beside the app containers: too much, never too little).
    """
    footprints: dict[str, dict[str, Usage]] = {}
    guesses: dict[str, list[str]] = {}
    for assignment in assignments:
        if assignment.resource != resource:
            continue
        usage, guess = _container_usage(assignment, cards)
        total = footprints.setdefault(assignment.pod_uid, {})
        for uuid, amount in usage.items():
            total[uuid] = total.get(uuid, Usage()) + amount
        if guess:
            guesses.setdefault(assignment.pod_uid, []).append(
                f"container {assignment.container}: {guess}"
            )
    return {
        uid: KubeletHolding(uid, footprint, tuple(guesses.get(uid, ())))
        for uid, footprint in footprints.items()
    }


def replica_card(device_id: str) -> str:
    """The GPU uuid of a replica id `<uuid>-<n>` (HAMi's and vgpu's), else the id as it is."""
    match = _REPLICA.match(device_id)
    return match.group(1) if match else device_id


def _container_usage(
    assignment: DeviceAssignment, cards: Mapping[str, Device]
) -> tuple[dict[str, Usage], str]:
    """The container's usage per card and, when it had to be guessed, why."""
    envs = assignment.envs
    problem = "no Allocate answer kept" if envs is None else ""
    if envs is not None:
        exact, problem = _from_answer(envs, cards)
        if not problem:
            return exact, ""
    ids = (i if i in cards else replica_card(i) for i in assignment.device_ids)
    named = [uuid for uuid in dict.fromkeys(ids) if uuid in cards]
    if not named:
        return {}, f"{problem}; its device ids name no GPU of this node"
    whole = {uuid: _whole(cards[uuid]) for uuid in named}
    return whole, f"{problem}: counted as the whole of {', '.join(named)}"


def _from_answer(
    envs: Mapping[str, str], cards: Mapping[str, Device]
) -> tuple[dict[str, Usage], str]:
    visible = [u.strip() for u in envs.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if u.strip()]
    if not visible:
        return {}, "the Allocate answer names no card in NVIDIA_VISIBLE_DEVICES"
    usage: dict[str, Usage] = {}
    for index, uuid in enumerate(visible):
        card = cards.get(uuid)
        if card is None or card.mode == MIG_MODE:
            return {}, f"the Allocate answer names {uuid[:80]}, not a shared GPU of this node"
        memory = _memory(envs, index, card)
        cores = _cores(envs, index, card)
        if memory is None or cores is None:
            return {}, f"the Allocate answer's limits for {uuid} do not read"
        usage[uuid] = usage.get(uuid, Usage()) + Usage(1, memory, cores)
    return usage, ""


def _memory(envs: Mapping[str, str], index: int, card: Device) -> int | None:
    """MiB, HAMi-core's way: the per-card limit, else the one for all cards, else the card."""
    text = envs.get(f"CUDA_DEVICE_MEMORY_LIMIT_{index}", envs.get("CUDA_DEVICE_MEMORY_LIMIT"))
    if text is None:
        return card.memory
    match = _HAMI_CORE_MEMORY.match(text.strip())
    if match is None:
        return None
    times, per = _TO_MIB[match.group(2).lower()]
    return -(-int(match.group(1)) * times // per)  # rounded up


def _cores(envs: Mapping[str, str], index: int, card: Device) -> int | None:
    """Percent, the per-card limit, else the one for all cards, else (no limit) the card's."""
    text = envs.get(f"CUDA_DEVICE_SM_LIMIT_{index}", envs.get("CUDA_DEVICE_SM_LIMIT"))
    if text is None:
        return card.cores
    return int(text) if _SM_LIMIT.match(text.strip()) else None


def _whole(card: Device) -> Usage:
    return Usage(card.count, card.memory, card.cores, _WHOLE_MIG)
