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


class HamiPair:
    """A replay's nodes under one HAMi pair: `choose` a node for a pod, `place` it there."""

    def __init__(self, nodes: Sequence[MilliNode], ranks: Sequence[int], pair: PolicyPair) -> None:
        digits = len(str(max(len(nodes) - 1, 0)))
        self._names = [f"node-{rank:0{digits}d}" for rank in ranks]
        self._index = {name: i for i, name in enumerate(self._names)}
        self._cpu = [node.cpu for node in nodes]
        self._memory = [node.memory for node in nodes]
        self._ledger = Ledger()
        for name, node in zip(self._names, nodes, strict=True):
            self._ledger.set_node(name, hami_devices(name, node))
        self._config = SchedulingConfig(policies=PodPolicies(node=pair.node, gpu=pair.gpu))
        self._plans: dict[_Shape, PodPlan] = {}
        self._fitting: dict[tuple[int, int], _Fitting] = {}
        self._changed: list[int] = []  # the nodes that took a pod, in order
        self._placed = 0
        self._decision: Placement | None = None  # what `choose` found, for `place`

    def choose(self, pod: MilliPod) -> int | None:
        """The node that takes `pod`, or None when none fits."""
        fitting = self._resources_fit(pod)
        if not pod.gpus:
            return self._index[next(iter(fitting))] if fitting else None
        plan = replace(self._plan(pod), key=f"trace/p{self._placed}")
        decision = self._ledger.decide(plan, fitting)
        if not isinstance(decision, Placement):
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
        self._ledger.grant(f"trace/p{self._placed}", decision.node, decision.grants)
        self._placed += 1
        self._decision = None
        return tuple(int(grant.uuid.rsplit("-", 1)[1]) for grant in decision.grants[0])

    def _resources_fit(self, pod: MilliPod) -> dict[str, None]:
        """The names of the nodes with the pod's CPU and memory free, in rank order (the name
        order): kept per CPU and memory asked, brought up to date with the nodes changed since,
        as no pod ever leaves and a node that stops fitting never fits again."""
        key = (pod.cpu, pod.memory)
        found = self._fitting.get(key)
        names = self._names
        if found is None:
            in_rank_order = sorted(range(len(names)), key=names.__getitem__)
            fitting = {names[i]: None for i in in_rank_order if self._fits(i, pod)}
            found = self._fitting[key] = _Fitting(fitting, len(self._changed))
        for i in self._changed[found.seen :]:
            if not self._fits(i, pod):
                found.nodes.pop(names[i], None)
        found.seen = len(self._changed)
        return found.nodes

    def _fits(self, node: int, pod: MilliPod) -> bool:
        return self._cpu[node] >= pod.cpu and self._memory[node] >= pod.memory

    def _plan(self, pod: MilliPod) -> PodPlan:
        shape = (pod.gpus, pod.milli, pod.models)
        plan = self._plans.get(shape)
        if plan is None:
            manifest = hami_manifest("trace-pod", pod, {})
            found = plan_pod(pod_from_manifest(manifest), self._config)
            assert found is not None  # it asks for GPUs
            plan = self._plans[shape] = found
        return plan


class _Fitting:
    __slots__ = ("nodes", "seen")

    def __init__(self, nodes: dict[str, None], seen: int) -> None:
        self.nodes = nodes
        self.seen = seen  # how much of the change log `nodes` reflects
