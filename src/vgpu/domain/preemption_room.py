"""A quick test ahead of the victim search's full fit: can a set of victims make room at all?

Once the set is gone, every container of the pod must find at least as many cards as it asks
for with a free slice and the memory and cores of one of its devices (`Usage.fits_in`).
`fit_pod` refuses every card this refuses, so a set that fails here cannot fit; a set that
passes still needs the full fit (selectors, NUMA, quota). The test costs a few dictionary
lookups per victim, against a full fit per set, and most sets the search examines fail it.
"""

from collections.abc import Iterable, Mapping, Sequence

from vgpu.domain.device import IDLE, MIG_MODE, Usage
from vgpu.domain.fit import NodeView, PodPlan
from vgpu.domain.request import ContainerRequest

Footprint = Mapping[str, Usage]  # what one victim holds per card (uuid) of the node
Need = tuple[int, int, int]  # slices, MiB and cores a card must get back to take one device


class Room:
    """The test for one pod on one node. A pod that may take MIG instances, several to a card,
    always passes.

    >>> from vgpu.domain import ContainerRequest, Device
    >>> from vgpu.domain.fit import ANY_CARD, DEFAULT_POLICIES
    >>> card = Device("GPU-0", 0, "NVIDIA A100", count=4, memory=40000)
    >>> node = NodeView("n", (card,), {"GPU-0": Usage(3, 30000, 60)})
    >>> small, tiny = {"GPU-0": Usage(1, 5000, 20)}, {"GPU-0": Usage(1, 1000, 10)}
    >>> large = {"GPU-0": Usage(1, 24000, 30)}
    >>> plan = PodPlan("ns/p", "ns", ("c",), (ContainerRequest(1, memory=20000),), 0,
    ...                ANY_CARD, DEFAULT_POLICIES)
    >>> room = Room(plan, node)
    >>> room.may_fit([small, tiny]), room.may_fit([large]), room.fewest([small, tiny, large])
    (False, True, 1)
    """

    __slots__ = ("_needs", "_watched")

    def __init__(self, plan: PodPlan, node: NodeView) -> None:
        # per container short of cards: how many it lacks, and what each card that could gain
        # room for it must get back
        self._needs: list[tuple[int, dict[str, Need]]] = []
        if not plan.selector.takes_mig:
            for request in plan.requests:
                if request is not None:
                    self._add_need(request, node)
        self._watched = {uuid for _, short in self._needs for uuid in short}

    def may_fit(self, footprints: Iterable[Footprint]) -> bool:
        """False when victims holding these cannot make room, whatever the fit says."""
        if not self._needs:
            return True
        watched = self._watched
        released: dict[str, list[int]] = {}
        for footprint in footprints:
            for uuid, amount in footprint.items():
                if uuid not in watched:
                    continue
                got = released.get(uuid)
                if got is None:
                    released[uuid] = [amount.slices, amount.memory, amount.cores]
                else:
                    got[0] += amount.slices
                    got[1] += amount.memory
                    got[2] += amount.cores
        for lacking, short in self._needs:
            gained = 0
            for uuid, (slices, memory, cores) in released.items():
                need = short.get(uuid)
                if need is not None and (
                    slices >= need[0] and memory >= need[1] and cores >= need[2]
                ):
                    gained += 1
            if gained < lacking:
                return False
        return True

    def fewest(self, footprints: Sequence[Footprint]) -> int:
        """A lower bound on the size of a set of these victims that passes `may_fit`: a card a
        container lacks needs at least so many victims gone (`_fewest_for`), and one victim
        counts for at most as many of those cards as it holds; more than all: none passes."""
        most = 0
        for lacking, short in self._needs:
            each = sorted(_fewest_for(uuid, need, footprints) for uuid, need in short.items())
            if len(each) < lacking or each[lacking - 1] > len(footprints):
                return len(footprints) + 1
            shared = max((sum(u in short for u in held) for held in footprints), default=1)
            most = max(most, -(-sum(each[:lacking]) // max(shared, 1)))
        return most

    def _add_need(self, request: ContainerRequest, node: NodeView) -> None:
        lacking, short = request.count, {}
        for device in node.devices:
            if device.mode == MIG_MODE:  # `fits_in` counts only slices there
                left = (device.count - 1, 0, 0)
            else:
                memory = request.memory_on(device)
                left = (device.count - 1, device.memory - memory, device.cores - request.cores)
            if min(left) < 0:
                continue  # never room for one device, whatever goes
            used = node.usage.get(device.uuid, IDLE)
            need = (used.slices - left[0], used.memory - left[1], used.cores - left[2])
            if max(need) <= 0:
                lacking -= 1
            else:
                short[device.uuid] = need
        if lacking > 0:
            self._needs.append((lacking, short))


def _fewest_for(uuid: str, need: Need, footprints: Sequence[Footprint]) -> int:
    """At least how many victims must go for card `uuid` to get back `need`: per resource, the
    count of the largest releases there that add up to it; more than all when none do."""
    held = [f[uuid] for f in footprints if uuid in f]
    most = 0
    for wanted, part in zip(need, ("slices", "memory", "cores"), strict=True):
        if wanted <= 0:
            continue
        total = count = 0
        for release in sorted((getattr(u, part) for u in held), reverse=True):
            if total >= wanted:
                break
            total += release
            count += 1
        most = max(most, count if total >= wanted else len(footprints) + 1)
    return most
