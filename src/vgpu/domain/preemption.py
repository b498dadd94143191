"""Which running pods must go so that a waiting pod fits on a node: victim selection.

The answer is the cheapest set among the candidates whose release lets the pod fit under its
policies and its namespace's quota. Cheapest means, in this order: fewer victims, lower
priorities (the highest one first, as kube-scheduler compares), less GPU capacity disturbed
(MiB, then cores, then slices released), then pod names so the answer is deterministic.

Search bound: sets are tried by size, all sets of one size before any larger one, so the
answer is exact while the sets examined stay within `SEARCH_LIMIT` fit checks (with the
default 2048: every set of up to 3 victims among 22 candidates, up to 2 among 63, 1 among
2047). Past that bound a greedy pass takes victims cheapest first until the pod fits and then
gives back every victim it can spare; its answer always fits and has no victim too many, but
another set may be smaller.

Most sets examined do not make room. A quick test (`preemption_room.Room`) throws out, before the
full fit, a set that leaves some container fewer cards with room for one of its devices than it
asks for, and every size below the fewest victims that could: the fit would refuse them too, so
the answer is the same, found many times faster.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from math import comb

from vgpu.domain.device import IDLE, Usage
from vgpu.domain.fit import NodeView, PodPlan, fit_pod
from vgpu.domain.preemption_room import Room
from vgpu.domain.quota import UNLIMITED, Budget
from vgpu.domain.reasons import NodeRejection

SEARCH_LIMIT = 2048

Cost = tuple[int, tuple[int, ...], tuple[int, int, int], tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Victim:
    """A pod that could be evicted: what it holds on the node's cards and in its quota."""

    key: str
    namespace: str
    priority: int = 0
    footprint: Mapping[str, Usage] = field(default_factory=dict)  # card uuid -> usage, this node
    charge: Usage = IDLE  # what it counts against its namespace's quota

    @property
    def disturbed(self) -> tuple[int, int, int]:
        """GPU capacity its eviction gives back: MiB, cores, slices."""
        memory = cores = slices = 0
        for usage in self.footprint.values():
            memory += usage.memory
            cores += usage.cores
            slices += usage.slices
        return memory, cores, slices


def cost(victims: Iterable[Victim]) -> Cost:
    """The order of preference between victim sets; smaller is better."""
    chosen = list(victims)
    disturbed = [v.disturbed for v in chosen]
    return (
        len(chosen),
        tuple(sorted((v.priority for v in chosen), reverse=True)),
        (
            sum(d[0] for d in disturbed),
            sum(d[1] for d in disturbed),
            sum(d[2] for d in disturbed),
        ),
        tuple(sorted(v.key for v in chosen)),
    )


def fits_without(plan: PodPlan, node: NodeView, budget: Budget, victims: Iterable[Victim]) -> bool:
    """Whether the pod fits on `node` once `victims` have released their cards and quota."""
    usage = dict(node.usage)
    refund = Usage()
    for victim in victims:
        for uuid, amount in victim.footprint.items():
            usage[uuid] = usage.get(uuid, Usage()) - amount
        if victim.namespace == plan.namespace:
            refund = refund + victim.charge
    freed = replace(node, usage=usage)
    return not isinstance(fit_pod(plan, freed, _refunded(budget, refund)), NodeRejection)


def choose_victims(
    plan: PodPlan,
    priority: int,
    node: NodeView,
    victims: Sequence[Victim],
    budget: Budget = UNLIMITED,
    limit: int = SEARCH_LIMIT,
) -> tuple[Victim, ...] | None:
    """The cheapest set of `victims` of lower priority than `priority` whose release lets the
    pod fit on `node`; () when it fits already, None when no set helps."""
    if fits_without(plan, node, budget, ()):
        return ()
    eligible = [v for v in victims if v.priority < priority and _holds_something(v, plan)]
    if not eligible or not fits_without(plan, node, budget, eligible):
        return None
    room = Room(plan, node)
    fewest = room.fewest([v.footprint for v in eligible])

    def fits(chosen: Sequence[Victim]) -> bool:
        return room.may_fit(v.footprint for v in chosen) and fits_without(
            plan, node, budget, chosen
        )

    checked = 0
    for size in range(1, len(eligible)):
        checked += comb(len(eligible), size)
        if checked > limit:
            return _greedy(fits, eligible)
        if size < fewest:
            continue  # no set this small makes room
        feasible = [chosen for chosen in combinations(eligible, size) if fits(chosen)]
        if feasible:
            return min(feasible, key=cost)
    return tuple(eligible)


def _greedy(
    fits: Callable[[Sequence[Victim]], bool], eligible: Sequence[Victim]
) -> tuple[Victim, ...]:
    """Take victims lowest priority first (largest release first among equals) until the pod
    fits, then spare every one that is not needed, highest priority first."""
    order = sorted(eligible, key=lambda v: (v.priority, tuple(-x for x in v.disturbed), v.key))
    taken: list[Victim] = []
    for victim in order:
        taken.append(victim)
        if fits(taken):
            break
    for victim in sorted(taken, key=lambda v: (-v.priority, v.disturbed, v.key)):
        rest = [v for v in taken if v is not victim]
        if fits(rest):
            taken = rest
    return tuple(sorted(taken, key=lambda v: v.key))


def _holds_something(victim: Victim, plan: PodPlan) -> bool:
    """Only a victim with cards on the node, or quota in the pod's namespace, can help."""
    return bool(victim.footprint) or (
        victim.namespace == plan.namespace and not victim.charge.is_idle
    )


def _refunded(budget: Budget, refund: Usage) -> Budget:
    if budget is UNLIMITED or budget.blocked or refund.is_idle:
        return budget

    def back(left: int | None, amount: int) -> int | None:
        return None if left is None else left + amount

    return Budget(
        memory=back(budget.memory, refund.memory),
        cores=back(budget.cores, refund.cores),
        cards=back(budget.cards, refund.slices),
    )
