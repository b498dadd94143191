"""Remember which pod shapes a node turned down, so a busy cluster is not re-checked in vain.

Fitting is monotone: a node whose usage only grew since it rejected a pod also rejects any pod
of the same shape (namespace, card count, selectors, policies) that asks for at least as much
memory and cores. The simulator uses this to skip `decide` calls whose answer it already knows;
a node's entries are dropped as soon as it frees capacity. Rejections that involve the
namespace's quota are never remembered (the budget changes on its own schedule).
"""

from collections.abc import Hashable
from dataclasses import dataclass

from vgpu.domain import NodeRejection, PodPlan, Reason

Sizes = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Shape:
    """What must match for one pod's rejection to predict another's, and the sizes to compare."""

    key: Hashable
    sizes: Sizes


def shape_of(plan: PodPlan) -> Shape:
    key = (
        plan.namespace,
        plan.init_count,
        plan.selector,
        plan.policies,
        tuple(None if r is None else (r.count, r.memory > 0) for r in plan.requests),
    )
    sizes = tuple(
        value
        for r in plan.requests
        if r is not None
        for value in (r.memory if r.memory > 0 else r.memory_percent, r.cores)
    )
    return Shape(key, sizes)


def involves_quota(rejection: NodeRejection) -> bool:
    return rejection.reason is Reason.QUOTA or any(
        c.reason is Reason.QUOTA for c in rejection.cards
    )


class InfeasibleCache:
    """Per node, the smallest rejected sizes of each shape (a Pareto frontier)."""

    def __init__(self) -> None:
        self._nodes: dict[str, dict[Hashable, list[tuple[Sizes, NodeRejection]]]] = {}

    def lookup(self, node: str, shape: Shape) -> NodeRejection | None:
        """A rejection that still holds for `shape` on `node`, if one is known."""
        for sizes, rejection in self._nodes.get(node, {}).get(shape.key, ()):
            if all(a <= b for a, b in zip(sizes, shape.sizes, strict=True)):
                return rejection
        return None

    def remember(self, node: str, shape: Shape, rejection: NodeRejection) -> None:
        if involves_quota(rejection):
            return
        entries = self._nodes.setdefault(node, {}).setdefault(shape.key, [])
        kept = [
            (sizes, r)
            for sizes, r in entries
            if not all(a <= b for a, b in zip(shape.sizes, sizes, strict=True))
        ]
        kept.append((shape.sizes, rejection))
        entries[:] = kept

    def node_freed(self, node: str) -> None:
        self._nodes.pop(node, None)
