"""HAMi's node/GPU policy pairs on a trace, through vgpu's scheduler.

The trace's nodes and pods in HAMi's terms (`hami.py`) go to the scheduler's `Ledger`, and each
pod to `Ledger.decide` with its pair (`hami.io/node-scheduler-policy`,
`hami.io/gpu-scheduler-policy`), among the nodes whose free CPU and host memory cover it, as
kube-scheduler's resource filter passes them to the extender. Nodes are named in the order of
their protocol rank, so `decide`'s ties by name go to the lowest rank as the protocol's do. A pod
without GPUs never reaches the extender; it takes the lowest-rank node that fits, as it does
under the paper's policies that give it no score (GpuClustering, GpuPacking).
"""

from collections.abc import Sequence
from dataclasses import replace

from vgpu.domain import (
    Ledger,
    Placement,
    PodPlan,
    PodPolicies,
    SchedulingConfig,
    plan_pod,
    pod_from_manifest,
)
from vgpu.domain.fragmentation import MilliNode, MilliPod

from ..engine import PolicyPair
from .hami import hami_devices, hami_manifest

_Shape = tuple[int, int, frozenset[str]]  # cards, milli per card, models
_Need = tuple[int, int, frozenset[str], int, int]  # CPU, memory, models, cards, cores per card


class HamiPair:
    """A replay's nodes under one HAMi pair: `choose` a node for a pod, `place` it there."""

    def __init__(self, nodes: Sequence[MilliNode], ranks: Sequence[int], pair: PolicyPair) -> None:
        digits = len(str(max(len(nodes) - 1, 0)))
        self._names = [f"node-{rank:0{digits}d}" for rank in ranks]
        self._index = {name: i for i, name in enumerate(self._names)}
        self._in_rank_order = sorted(range(len(nodes)), key=self._names.__getitem__)
        self._cpu = [node.cpu for node in nodes]
        self._memory = [node.memory for node in nodes]
        self._models = [node.model for node in nodes]
        self._free_cores: list[list[int]] = []  # per node, per card, as the grants leave them
        self._ledger = Ledger()
        for name, node in zip(self._names, nodes, strict=True):
            devices = hami_devices(name, node)
            self._ledger.set_node(name, devices)
            self._free_cores.append([device.cores for device in devices])
        self._config = SchedulingConfig(policies=PodPolicies(node=pair.node, gpu=pair.gpu))
        self._plans: dict[_Shape, PodPlan] = {}
        self._candidates: dict[_Need, _Candidates] = {}
        self._changed: list[int] = []  # the nodes that took a pod, in order
        self._placed = 0
        self._decision: Placement | None = None  # what `choose` found, for `place`

    def choose(self, pod: MilliPod) -> int | None:
        """The node that takes `pod`, or None when none fits."""
        candidates = self._candidates_for(pod)
        if not pod.gpus:
            return self._index[next(iter(candidates))] if candidates else None
        plan = replace(self._plan(pod), key=f"trace/p{self._placed}")
        decision = self._decide(plan, candidates)
        if decision is None:
            return None
        self._decision = decision
        return self._index[decision.node]

    def place(self, node: int, pod: MilliPod) -> tuple[int, ...]:
        """Put `pod` on `node` (the last `choose` gave); the indexes of the cards it took."""
        self._cpu[node] -= pod.cpu
        self._memory[node] -= pod.memory
        self._changed.append(node)
        if not pod.gpus:
            return ()
        decision = self._decision
        assert decision is not None and decision.node == self._names[node]
        self._record(f"trace/p{self._placed}", decision)
        self._placed += 1
        self._decision = None
        cards = []
        for grant in decision.grants[0]:
            card = int(grant.uuid.rsplit("-", 1)[1])
            self._free_cores[node][card] -= grant.cores
            cards.append(card)
        return tuple(cards)

    def _decide(self, plan: PodPlan, candidates: dict[str, None]) -> Placement | None:
        """Where the scheduler puts the pod among `candidates` (in rank order), if anywhere."""
        decision = self._ledger.decide(plan, candidates)
        return decision if isinstance(decision, Placement) else None

    def _record(self, pod: str, placement: Placement) -> None:
        """The pod holds what it was granted."""
        self._ledger.grant(pod, placement.node, placement.grants)

    def _candidates_for(self, pod: MilliPod) -> dict[str, None]:
        """The names of the nodes that may take the pod, in rank order (the name order): free
        CPU and host memory for it (kube-scheduler's filter), its card model, and enough cards
        with its cores free. A node without those is turned away by the scheduler's own rules
        (`decide` then only asks fewer nodes), and as no pod ever leaves, for good: so the
        list is kept per need and brought up to date with the nodes changed since."""
        need = self._need(pod)
        found = self._candidates.get(need)
        names = self._names
        if found is None:
            nodes = {names[i]: None for i in self._in_rank_order if self._may_take(i, need)}
            found = self._candidates[need] = _Candidates(nodes, len(self._changed))
        for i in self._changed[found.seen :]:
            if names[i] in found.nodes and not self._may_take(i, need):
                del found.nodes[names[i]]
        found.seen = len(self._changed)
        return found.nodes

    def _need(self, pod: MilliPod) -> _Need:
        if not pod.gpus:
            return (pod.cpu, pod.memory, frozenset(), 0, 0)
        request = self._plan(pod).requests[0]
        assert request is not None  # the one container asks for GPUs
        return (pod.cpu, pod.memory, pod.models, request.count, request.cores)

    def _may_take(self, node: int, need: _Need) -> bool:
        cpu, memory, models, cards, cores = need
        if models and self._models[node] not in models:
            return False
        if self._cpu[node] < cpu or self._memory[node] < memory:
            return False
        free = self._free_cores[node]
        if cards == 1:
            return max(free, default=-1) >= cores
        return sum(left >= cores for left in free) >= cards

    def _plan(self, pod: MilliPod) -> PodPlan:
        shape = (pod.gpus, pod.milli, pod.models)
        plan = self._plans.get(shape)
        if plan is None:
            manifest = hami_manifest("trace-pod", pod, {})
            found = plan_pod(pod_from_manifest(manifest), self._config)
            assert found is not None  # it asks for GPUs
            plan = self._plans[shape] = found
        return plan


class _Candidates:
    __slots__ = ("nodes", "seen")

    def __init__(self, nodes: dict[str, None], seen: int) -> None:
        self.nodes = nodes
        self.seen = seen  # how much of the change log `nodes` reflects
