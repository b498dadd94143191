"""The trace with DRA: the same pods as ResourceClaims on slices of the same cards, allocated
by kube-scheduler's allocator (`vgpu simulate --trace --dra`).

Nodes are tried in rank order (the protocol's order for policies that score nothing: the stock
scheduler scores CPU and memory, not GPUs) behind the same CPU, memory and free-cores filter as
HAMi's pairs; the first node the allocator serves takes the pod. A node that cannot serve a
pod's claim never can again for pods that ask alike (no pod leaves), so it is dropped from
their candidates.
"""

from collections.abc import Sequence

from vgpu.domain import Placement, PodPlan
from vgpu.domain.fragmentation import MilliNode

from ..dra import DraPlacer
from ..engine import HAMI_DEFAULT
from .hami import hami_devices
from .hami_pairs import HamiPair


class DraPair(HamiPair):
    """A replay's nodes with DRA: `choose` a node for a pod, `place` it there."""

    def __init__(self, nodes: Sequence[MilliNode], ranks: Sequence[int]) -> None:
        super().__init__(nodes, ranks, HAMI_DEFAULT)  # the pair is unused: claims have none
        self._placer = DraPlacer(
            {name: hami_devices(name, node) for name, node in zip(self._names, nodes, strict=True)}
        )

    def _decide(self, plan: PodPlan, candidates: dict[str, None]) -> Placement | None:
        decision = self._placer.decide(plan, candidates.keys())
        for node in decision.rejections:
            del candidates[node]
        return decision if isinstance(decision, Placement) else None

    def _record(self, pod: str, placement: Placement) -> None:
        self._placer.placed(pod, placement.node)
