"""Why a pod does or does not fit, node by node, and the smallest change that would place it.

`explain` runs the scheduler's own `decide` over the nodes and words the answer for people:
one sentence per node (the closest card and what it lacks), nodes grouped by reason so that a
thousand nodes read as a few lines, the grant the pod would get, and — when it fits nowhere —
what would make it fit: fewer MiB or cores per card, other card types or UUIDs, no NUMA
binding, more namespace quota, or named pods finishing (`choose_victims` without priorities).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from vgpu.domain.decision import Decision, Placement, decide
from vgpu.domain.device import Device
from vgpu.domain.fit import NodeView, PodPlan
from vgpu.domain.grant import DeviceGrant, PodGrants
from vgpu.domain.preemption import Victim, choose_victims, cost
from vgpu.domain.quota import UNLIMITED, Budget, pod_charge
from vgpu.domain.reasons import NodeRejection, Reason, phrase
from vgpu.domain.request import ContainerRequest

EXAMPLES = 5  # node names shown per group
WAIT_SEARCH_LIMIT = 256  # fit checks per node when looking for pods to wait for
_EVERYONE = 2**63  # a priority above every pod: waiting for pods ignores priorities


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """One node's answer: fits, or the reason token and a sentence; `short` orders how close
    a rejected node came (smaller is closer)."""

    node: str
    fits: bool
    reason: str
    sentence: str
    short: int = 0


@dataclass(frozen=True, slots=True)
class Group:
    """Nodes sharing a verdict: how many, a few names, and the closest one's sentence."""

    reason: str
    label: str
    nodes: tuple[str, ...]
    closest: NodeVerdict


@dataclass(frozen=True, slots=True)
class Suggestion:
    """One change that would place the pod: what (`memory`, `cores`, `types`, `uuids`, `numa`,
    `quota`, `wait`), the new value, and where the pod would then go."""

    change: str
    text: str
    node: str
    value: Any = None


@dataclass(frozen=True, slots=True)
class Held:
    """Where a pod that is already placed is, in which phase, and the cards it holds there as
    the scheduler counts them (none when no grant of it is believed)."""

    node: str
    phase: str
    grants: PodGrants = ()

    def sentence(self) -> str:
        where = (
            f"runs on {self.node}"
            if self.phase == "Running"
            else (f"is placed on {self.node} (phase {self.phase})")
        )
        if not any(self.grants):
            return f"{where} and holds no card the scheduler counts"
        return f"{where} and holds {_grants(self.grants)}"


@dataclass(frozen=True, slots=True)
class Explanation:
    """The answer for one pod: a summary, where it would go (`placement`) or why not, node by
    node and grouped, the changes that would place it, and, for a pod already placed, where it
    is (`held`; the rest then says how it would fare if it were scheduled again now)."""

    pod: str
    summary: str
    placement: Placement | None
    verdicts: tuple[NodeVerdict, ...]
    groups: tuple[Group, ...]
    suggestions: tuple[Suggestion, ...] = field(default=())
    held: Held | None = None

    @property
    def fits(self) -> bool:
        return self.placement is not None

    def short_form(self) -> str:
        """One line for an Event: the node that came closest and what it lacks."""
        if self.placement is not None or not self.groups:
            return self.summary
        closest = min((g.closest for g in self.groups), key=lambda v: (v.short, v.node))
        return f"closest: {closest.node}: {closest.sentence}"

    def lines(self) -> list[str]:
        """The human report."""
        if self.held is None:
            out = [f"pod {self.pod}: {self.summary}"]
        else:
            out = [
                f"pod {self.pod}: {self.held.sentence()}",
                f"  if it were scheduled again now, it {self.summary}",
            ]
        if self.placement is not None:
            out.append(
                f"  would get: node {self.placement.node}, " + _grants(self.placement.grants)
            )
        for group in self.groups:
            count = len(group.nodes)
            names = ", ".join(group.nodes[:EXAMPLES])
            more = f" and {count - EXAMPLES} more" if count > EXAMPLES else ""
            noun = "node" if count == 1 else "nodes"
            out.append(f"  {count} {noun}, {group.label}: {names}{more}")
            if group.reason:
                out.append(f"    closest: {group.closest.node}: {group.closest.sentence}")
        if self.suggestions:
            out.append("  it would fit with one of these changes:")
            out.extend(f"    - {s.text}" for s in self.suggestions)
        elif self.placement is None:
            out.append("  no single change found that would place it")
        return out

    def to_dict(self) -> dict[str, Any]:
        placement = None
        if self.placement is not None:
            placement = {"node": self.placement.node, "grants": _grant_dicts(self.placement.grants)}
        held = None
        if self.held is not None:
            held = {
                "node": self.held.node,
                "phase": self.held.phase,
                "grants": _grant_dicts(self.held.grants),
            }
        return {
            "pod": self.pod,
            "held": held,
            "fits": self.fits,
            "summary": self.summary,
            "placement": placement,
            "groups": [
                {
                    "reason": g.reason,
                    "label": g.label,
                    "count": len(g.nodes),
                    "nodes": list(g.nodes),
                    "closest": {"node": g.closest.node, "sentence": g.closest.sentence},
                }
                for g in self.groups
            ],
            "nodes": [
                {"node": v.node, "fits": v.fits, "reason": v.reason, "sentence": v.sentence}
                for v in self.verdicts
            ],
            "suggestions": [
                {"change": s.change, "value": s.value, "node": s.node, "text": s.text}
                for s in self.suggestions
            ],
        }


def explain(
    plan: PodPlan,
    nodes: Sequence[NodeView],
    budget: Budget = UNLIMITED,
    broken: Mapping[str, NodeRejection] | None = None,
    holders: Sequence[tuple[str, Victim]] = (),
    *,
    suggest: bool = True,
    decision: Decision | None = None,
) -> Explanation:
    """The explanation of `decide(plan, nodes, budget)` (pass `decision` when it is at hand).
    `broken` are nodes known to be unusable (a malformed annotation); `holders` are the running
    pods as (node, victim) with their footprint on that node, used to name pods worth waiting
    for. Without `suggest` no change is searched for: one pass over the rejections."""
    if decision is None:
        decision = decide(plan, nodes, budget)
    rejections = {**decision.rejections, **(broken or {})}
    views = {n.name: n for n in nodes}
    verdicts = [_verdict(r, views.get(name), budget) for name, r in sorted(rejections.items())]
    placement = decision if isinstance(decision, Placement) else None
    if placement is not None:
        verdicts += [NodeVerdict(s.node, True, "", "fits") for s in placement.scores]
        verdicts.sort(key=lambda v: v.node)
    groups = _groups(verdicts)
    fitting = len(placement.scores) if placement is not None else 0
    summary = f"fits on {fitting}/{len(verdicts)} nodes"
    if placement is not None:
        summary += f"; the scheduler would choose {placement.node}"
    elif groups:
        summary += ": " + ", ".join(f"{len(g.nodes)} {g.label}" for g in groups)
    suggestions: tuple[Suggestion, ...] = ()
    if placement is None and suggest and nodes:
        suggestions = _suggestions(plan, nodes, budget, holders)
    return Explanation(
        plan.key, summary, placement, tuple(verdicts), _groups(verdicts), suggestions
    )


# per node ------------------------------------------------------------------------------------
def _verdict(rejection: NodeRejection, view: NodeView | None, budget: Budget) -> NodeVerdict:
    reason = rejection.reason
    devices = {d.uuid: d for d in view.devices} if view is not None else {}
    over_quota = [c for c in rejection.cards if c.reason is Reason.QUOTA]
    if over_quota:  # a card had room: the quota, not the node, is what stands in the way
        card = _card(over_quota[0].uuid, devices)
        sentence = f"card {card} has room, but {budget.describe()}"
        return NodeVerdict(rejection.node, False, Reason.QUOTA.value, sentence, _FAR - 1)
    if reason in _UNITS:
        relevant = [c for c in rejection.cards if c.reason is reason]
        if relevant:
            best = max(relevant, key=lambda c: (c.free, c.uuid))
            unit = _UNITS[reason]
            short = best.need - best.free
            sentence = (
                f"closest card {_card(best.uuid, devices)} has {best.free} {unit} free, "
                f"{short} {unit} short of the {best.need} {unit} asked"
            )
            return NodeVerdict(rejection.node, False, reason.value, sentence, short)
    if reason is Reason.SLICES_EXHAUSTED and view is not None:
        shares = ", ".join(
            f"{d.uuid} {view.usage[d.uuid].slices}/{d.count}"
            for d in view.devices
            if d.uuid in view.usage and view.usage[d.uuid].slices >= d.count
        )
        sentence = f"its cards are shared by as many containers as they allow ({shares})"
        return NodeVerdict(rejection.node, False, reason.value, sentence, _FAR)
    if reason is Reason.MIG_TOPOLOGY:
        cards = [c for c in rejection.cards if c.reason is reason]
        noun = "card has" if len(cards) == 1 else "cards have"
        sentence = (
            f"{len(cards)} MIG {noun} no free placement for a profile of at least "
            f"{cards[0].need} MiB (instances there may not overlap; one must end first)"
        )
        return NodeVerdict(rejection.node, False, reason.value, sentence, _FAR)
    if reason is Reason.TYPE_MISMATCH and devices:
        types = ", ".join(sorted({d.type for d in devices.values()}))
        sentence = f"its cards ({types}) are not a type the pod accepts"
        return NodeVerdict(rejection.node, False, reason.value, sentence, _FAR)
    return NodeVerdict(rejection.node, False, reason.value, rejection.message, _FAR)


_UNITS = {Reason.INSUFFICIENT_MEMORY: "MiB", Reason.INSUFFICIENT_CORES: "% cores"}
_FAR = 2**31  # a rejection without a measurable shortfall sorts after every measured one


def _card(uuid: str, devices: Mapping[str, Device]) -> str:
    device = devices.get(uuid)
    return uuid if device is None else f"{uuid} ({device.type}, {device.memory} MiB)"


def _groups(verdicts: Sequence[NodeVerdict]) -> tuple[Group, ...]:
    by_reason: dict[str, list[NodeVerdict]] = {}
    for verdict in verdicts:
        by_reason.setdefault(verdict.reason, []).append(verdict)
    groups = [
        Group(
            reason,
            "can take it" if not reason else phrase(Reason(reason)),
            tuple(v.node for v in members),
            min(members, key=lambda v: (v.short, v.node)),
        )
        for reason, members in by_reason.items()
    ]
    groups.sort(key=lambda g: (g.reason != "", -len(g.nodes), g.reason))
    return tuple(groups)


# what would make it fit ----------------------------------------------------------------------
def _suggestions(
    plan: PodPlan, nodes: Sequence[NodeView], budget: Budget, holders: Sequence[tuple[str, Victim]]
) -> tuple[Suggestion, ...]:
    found = [
        _less(plan, nodes, budget, "memory"),
        _less(plan, nodes, budget, "cores"),
        *_relaxed(plan, nodes, budget),
        _quota(plan, nodes, budget),
        _wait(plan, nodes, budget, holders),
    ]
    return tuple(s for s in found if s is not None)


def _placed(plan: PodPlan, nodes: Sequence[NodeView], budget: Budget) -> Placement | None:
    decision = decide(plan, nodes, budget)
    return decision if isinstance(decision, Placement) else None


def _less(plan: PodPlan, nodes: Sequence[NodeView], budget: Budget, what: str) -> Suggestion | None:
    """The largest per-card amount, below what is asked, at which the pod fits (a binary
    search: fitting only gets easier as the amount shrinks)."""
    asked = max((_amount(r, what) for r in plan.requests if r is not None), default=0)
    low = 0 if what == "cores" else 1
    if asked <= low or _placed(_capped(plan, what, low), nodes, budget) is None:
        return None
    high = asked - 1
    while low < high:
        middle = (low + high + 1) // 2
        if _placed(_capped(plan, what, middle), nodes, budget) is not None:
            low = middle
        else:
            high = middle - 1
    placement = _placed(_capped(plan, what, low), nodes, budget)
    assert placement is not None
    unit = "MiB" if what == "memory" else "% of the cores"
    text = f"ask for at most {low} {unit} per card (now {asked}): it fits on {placement.node}"
    return Suggestion(what, text, placement.node, low)


def _amount(request: ContainerRequest, what: str) -> int:
    return request.memory if what == "memory" else request.cores


def _capped(plan: PodPlan, what: str, cap: int) -> PodPlan:
    def cap_one(request: ContainerRequest | None) -> ContainerRequest | None:
        if request is None:
            return None
        if what == "memory":
            return replace(request, memory=min(request.memory, cap)) if request.memory else request
        return replace(request, cores=min(request.cores, cap))

    return replace(plan, requests=tuple(cap_one(r) for r in plan.requests))


def _relaxed(plan: PodPlan, nodes: Sequence[NodeView], budget: Budget) -> list[Suggestion]:
    """Card constraints the pod could drop: its type and UUID choices, its NUMA binding."""
    selector = plan.selector
    options = []
    if selector.use_types or selector.avoid_types:
        wanted = replace(selector, use_types=(), avoid_types=())
        options.append(("types", "accept other card types", replace(plan, selector=wanted)))
    if selector.use_uuids or selector.avoid_uuids:
        wanted = replace(selector, use_uuids=frozenset(), avoid_uuids=frozenset())
        options.append(("uuids", "drop the card UUID choice", replace(plan, selector=wanted)))
    if selector.numa_bind or plan.policies.numa:
        options.append(
            (
                "numa",
                "drop the NUMA binding",
                replace(
                    plan,
                    selector=replace(selector, numa_bind=False),
                    policies=replace(plan.policies, numa=False),
                ),
            )
        )
    found = []
    for change, words, relaxed in options:
        placement = _placed(relaxed, nodes, budget)
        if placement is not None:
            types = _types(placement, nodes)
            text = f"{words}: it fits on {placement.node} ({types})"
            found.append(Suggestion(change, text, placement.node, types))
    return found


def _types(placement: Placement, nodes: Sequence[NodeView]) -> str:
    view = next(n for n in nodes if n.name == placement.node)
    by_uuid = {d.uuid: d.type for d in view.devices}
    used = {by_uuid.get(g.uuid, g.uuid) for c in placement.grants for g in c}
    return ", ".join(sorted(used))


def _quota(plan: PodPlan, nodes: Sequence[NodeView], budget: Budget) -> Suggestion | None:
    if budget is UNLIMITED:
        return None
    placement = _placed(plan, nodes, UNLIMITED)
    if placement is None:
        return None
    charge = pod_charge(placement.grants, plan.init_count)
    text = (
        f"more GPU quota in namespace {plan.namespace} ({budget.shortfall(charge)}): "
        f"it fits on {placement.node}"
    )
    return Suggestion("quota", text, placement.node, budget.shortfall(charge))


def _wait(
    plan: PodPlan, nodes: Sequence[NodeView], budget: Budget, holders: Sequence[tuple[str, Victim]]
) -> Suggestion | None:
    """The fewest running pods whose end lets the pod fit somewhere (cheapest set wins)."""
    if not holders:
        return None
    best: tuple[Victim, ...] | None = None
    where = ""
    quota_only = [  # pods elsewhere matter only for the quota they would give back
        replace(v, footprint={})
        for _, v in holders
        if budget is not UNLIMITED and v.namespace == plan.namespace
    ]
    for view in nodes:
        local = [v for node, v in holders if node == view.name]
        others = [v for v in quota_only if v.key not in {x.key for x in local}]
        candidates = local + others
        chosen = choose_victims(plan, _EVERYONE, view, candidates, budget, WAIT_SEARCH_LIMIT)
        if chosen and (best is None or cost(chosen) < cost(best)):
            best, where = chosen, view.name
    if best is None:
        return None
    names = sorted(v.key for v in best)
    text = f"wait for {', '.join(names)} to finish: it then fits on {where}"
    return Suggestion("wait", text, where, names)


def _grants(grants: PodGrants) -> str:
    parts = [
        f"{g.uuid} {g.memory} MiB {g.cores}% cores{_instance(g)}"
        for container in grants
        for g in container
    ]
    return "cards " + ("; ".join(parts) or "none")


def _instance(grant: DeviceGrant) -> str:
    if grant.mig is None:
        return ""
    start, size = grant.mig.placement.start, grant.mig.placement.size
    return f" as MIG {grant.mig.profile} at slices {start}-{start + size - 1}"


def _grant_dicts(grants: PodGrants) -> list[list[dict[str, Any]]]:
    return [[_grant_dict(g) for g in container] for container in grants]


def _grant_dict(grant: DeviceGrant) -> dict[str, Any]:
    found: dict[str, Any] = {"uuid": grant.uuid, "memory": grant.memory, "cores": grant.cores}
    if grant.mig is not None:
        placement = grant.mig.placement
        found["mig"] = {
            "profile": grant.mig.profile,
            "placement": {"start": placement.start, "size": placement.size},
        }
    return found
