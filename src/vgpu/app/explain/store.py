"""The scheduler's last decision per pod, kept to be explained on request.

The filter verb hands over what it decided on (`record`); the words, and the search for what
would make the pod fit, are only worked out when someone asks (`explanation`), so a busy
scheduler pays for explanations nobody reads only with memory: the last `capacity` pods.
"""

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vgpu.domain import Budget, NodeRejection, NodeView, PodPlan
from vgpu.domain.decision import Decision, NoPlacement
from vgpu.domain.explain import Explanation, explain


@dataclass(frozen=True, slots=True)
class _Inputs:
    plan: PodPlan
    nodes: tuple[NodeView, ...]
    budget: Budget
    broken: Mapping[str, NodeRejection]
    decision: Decision


class ExplanationStore:
    """Bounded and thread-safe; recording a pod again replaces its earlier decision."""

    def __init__(self, capacity: int = 64) -> None:
        if capacity < 1:
            raise ValueError(f"capacity={capacity} must be at least 1")
        self._capacity = capacity
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Inputs] = OrderedDict()

    def record(
        self,
        plan: PodPlan,
        nodes: Sequence[NodeView],
        budget: Budget,
        broken: Mapping[str, NodeRejection],
        decision: Decision,
    ) -> str:
        """Keep the decision; for a pod that fits nowhere, return the short form for its
        FilteringFailed event (the closest node and what it lacks), else ''."""
        inputs = _Inputs(plan, tuple(nodes), budget, dict(broken), decision)
        with self._lock:
            self._entries[plan.key] = inputs
            self._entries.move_to_end(plan.key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
        if not isinstance(decision, NoPlacement):
            return ""
        return _explain(inputs, suggest=False).short_form()

    def explanation(self, namespace: str, name: str) -> Explanation | None:
        """The full explanation of the pod's last recorded decision, or None."""
        with self._lock:
            inputs = self._entries.get(f"{namespace}/{name}")
        return None if inputs is None else _explain(inputs, suggest=True)


def _explain(inputs: _Inputs, *, suggest: bool) -> Explanation:
    return explain(
        inputs.plan,
        inputs.nodes,
        inputs.budget,
        inputs.broken,
        suggest=suggest,
        decision=inputs.decision,
    )
