"""kube-scheduler's preemption verb: which of its proposed victims must really go for the GPUs.

kube-scheduler picks victims per node by its own resources and cannot see GPU slices. For every
candidate node this use case keeps the cheapest subset of the proposed victims whose grants,
once released, let the pod fit on that node under its policies and quota (`choose_victims`),
and drops the node when no subset helps. Victims that hold no GPU grant of ours on the node
were chosen by kube-scheduler for its own resources, which only it can judge: they are kept.
When the pod already fits the node's GPUs, the proposal is returned unchanged. A node is never
answered without victims (kube-scheduler takes that for an extender error). Nothing is
written: kube-scheduler evicts, and the pod is filtered again afterwards.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu.app.scheduler.state import SchedulerState
from vgpu.domain import DomainError, Pod, SchedulingConfig, plan_pod, pod_from_manifest
from vgpu.domain.fit import PodPlan
from vgpu.domain.preemption import Victim, choose_victims
from vgpu.domain.quota import pod_charge


@dataclass(frozen=True, slots=True)
class Proposed:
    """One victim kube-scheduler proposes: its UID, and the pod itself when it was sent."""

    uid: str
    pod: Pod | None = None


@dataclass(frozen=True, slots=True)
class NodeVictims:
    victims: tuple[Proposed, ...]
    pdb_violations: int = 0


@dataclass(frozen=True, slots=True)
class PreemptResult:
    """The nodes kept, each with the victims that must go; `error` for a pod we cannot read."""

    nodes: dict[str, NodeVictims] = field(default_factory=dict)
    error: str = ""


PodsOn = Callable[[str], Sequence[Pod]]  # the pods on a node, to resolve victims sent by UID


class Preempter:
    """Answers `/preempt` from the scheduler's state; reads it under its lock, writes nothing."""

    def __init__(
        self, state: SchedulerState, scheduling: SchedulingConfig, pods_on: PodsOn
    ) -> None:
        self._state = state
        self._scheduling = scheduling
        self._pods_on = pods_on

    def preempt(
        self, manifest: Mapping[str, Any], proposals: Mapping[str, NodeVictims]
    ) -> PreemptResult:
        try:
            pod = pod_from_manifest(manifest)
            plan = plan_pod(pod, self._scheduling)
        except DomainError as exc:
            return PreemptResult(error=f"pod cannot be scheduled: {exc}")
        if plan is None:  # not a GPU pod: kube-scheduler's own judgement stands
            return PreemptResult(dict(proposals))
        kept: dict[str, NodeVictims] = {}
        for node, proposal in proposals.items():
            chosen = self._choose(plan, pod.priority, node, proposal)
            if chosen is not None:
                kept[node] = chosen
        return PreemptResult(kept)

    def _choose(
        self, plan: PodPlan, priority: int, node: str, proposal: NodeVictims
    ) -> NodeVictims | None:
        resolved = self._resolve(node, proposal.victims)
        state = self._state
        with state.locked():
            views, broken = state.snapshot_views([node], exclude_pod=plan.key)
            if broken or not views:
                return None
            budget = state.budget(plan.namespace, plan.key, plan.init_count)
            holders: dict[str, Victim] = {}
            for proposed, pod in resolved:
                victim = self._victim(pod, node) if pod is not None else None
                if victim is not None:
                    holders[proposed.uid] = victim
        chosen = choose_victims(plan, priority, views[0], list(holders.values()), budget)
        if chosen is None:
            return None
        if not chosen:
            victims = proposal.victims
        else:
            going = {v.key for v in chosen}
            victims = tuple(
                p for p in proposal.victims if p.uid not in holders or holders[p.uid].key in going
            )
        if not victims:  # kube-scheduler takes a node without victims for an extender error
            return None
        return NodeVictims(victims, proposal.pdb_violations)

    def _resolve(self, node: str, victims: Sequence[Proposed]) -> list[tuple[Proposed, Pod | None]]:
        """Each proposed victim with its pod: as sent, else found by UID among the node's."""
        if all(v.pod is not None for v in victims):
            return [(v, v.pod) for v in victims]
        by_uid = {p.uid: p for p in self._pods_on(node) if p.uid}
        return [(v, v.pod or by_uid.get(v.uid)) for v in victims]

    def _victim(self, pod: Pod, node: str) -> Victim | None:
        allocation = self._state.ledger.allocation(pod.key)
        if allocation is None or allocation.node != node:
            return None
        return Victim(
            pod.key,
            pod.namespace,
            pod.priority,
            dict(allocation.footprint),
            pod_charge(allocation.grants, pod.init_count),
        )
