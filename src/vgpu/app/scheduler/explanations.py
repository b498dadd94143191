"""The pods the scheduler last filtered, kept to be explained on request.

The filter verb only remembers the question (`record`: the pod's plan, the candidate nodes and
the namespace's budget); the words, and the search for what would make the pod fit, are worked
out when someone asks (`explanation`), against the ledger as it is then. So a busy scheduler pays
for explanations nobody reads only with memory: the last `capacity` pods.
"""

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vgpu.domain import Budget, NodeRejection, NodeView, PodPlan
from vgpu.domain.explain import Explanation, explain

Snapshot = Callable[[Sequence[str]], tuple[list[NodeView], dict[str, NodeRejection]]]
"""Copies of the named nodes' views, and rejections for nodes known to be broken."""


@dataclass(frozen=True, slots=True)
class _Question:
    plan: PodPlan
    nodes: tuple[str, ...]
    budget: Budget


class ExplanationStore:
    """Bounded and thread-safe; recording a pod again replaces its earlier question."""

    def __init__(self, snapshot: Snapshot, capacity: int = 64) -> None:
        if capacity < 1:
            raise ValueError(f"capacity={capacity} must be at least 1")
        self._snapshot = snapshot
        self._capacity = capacity
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Question] = OrderedDict()
        self._nodes: tuple[str, ...] = ()

    def record(self, plan: PodPlan, nodes: Sequence[str], budget: Budget) -> None:
        """Remember what the scheduler was asked about the pod (cheap: no views, no words).

        kube-scheduler sends every pod the same node names: questions share one copy of them
        (a new tuple of 5,000 names per filter, kept for `capacity` pods, is memory, and work
        for every young-generation collection until it is untracked)."""
        names = tuple(nodes)
        with self._lock:
            if names == self._nodes:
                names = self._nodes
            else:
                self._nodes = names
            question = _Question(plan, names, budget)
            self._entries[plan.key] = question
            self._entries.move_to_end(plan.key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def explanation(self, namespace: str, name: str) -> Explanation | None:
        """Why the pod's last filtered nodes do or do not take it now, or None if unknown."""
        with self._lock:
            question = self._entries.get(f"{namespace}/{name}")
        if question is None:
            return None
        views, broken = self._snapshot(question.nodes)
        return explain(question.plan, views, question.budget, broken, suggest=True)
