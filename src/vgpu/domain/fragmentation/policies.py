"""The placement policies on the FGD paper's cluster model by name (the paper's six and vgpu's
FGD-balanced): how each scores a node and picks its cards."""

import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from vgpu.domain.errors import PolicyError
from vgpu.domain.fragmentation.balanced import Balanced
from vgpu.domain.fragmentation.classic import best_fit, dot_prod, gpu_clustering, gpu_packing
from vgpu.domain.fragmentation.fgd import Fgd
from vgpu.domain.fragmentation.milli import (
    MILLI,
    MilliNode,
    MilliPod,
    fitting_cards,
    tightest_card,
    whole_cards,
)
from vgpu.domain.fragmentation.workload import MilliWorkload


class PaperPolicy(StrEnum):
    RANDOM = "random"
    DOTPROD = "dotprod"
    GPUCLUSTERING = "gpuclustering"
    GPUPACKING = "gpupacking"
    BESTFIT = "bestfit"
    FGD = "fgd"
    FGD_BALANCED = "fgd-balanced"  # vgpu's, not the paper's (balanced.py)


def parse_paper_policy(text: str, field: str = "policy") -> PaperPolicy:
    """A policy by name, any case; PolicyError names the field and lists the known ones."""
    try:
        return PaperPolicy(text.strip().lower())
    except ValueError:
        known = ", ".join(p.value for p in PaperPolicy)
        raise PolicyError(f"{field}={text!r} is not a known policy (use one of: {known})") from None


class Scored(Protocol):
    """A policy that scores every node that fits a pod (highest wins) and picks its cards."""

    def score(self, node: MilliNode, pod: MilliPod) -> int: ...

    def cards(self, node: MilliNode, pod: MilliPod) -> tuple[int, ...]: ...


@dataclass(frozen=True, slots=True)
class Heuristic:
    """A baseline: its node score, and the tightest card for a share (`tightest_fit`)."""

    rule: Callable[[MilliNode, MilliPod], int]

    def score(self, node: MilliNode, pod: MilliPod) -> int:
        return self.rule(node, pod)

    def cards(self, node: MilliNode, pod: MilliPod) -> tuple[int, ...]:
        return tightest_fit(node, pod)


class RandomPlacement:
    """Random: a uniformly random node among those that fit, and a uniformly random card
    among those that hold a share (whole cards: the lowest-index free ones)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def node(self, feasible: int) -> int:
        """Which of `feasible` nodes (by position) takes the pod."""
        return self.rng.randrange(feasible)

    def cards(self, node: MilliNode, pod: MilliPod) -> tuple[int, ...]:
        if pod.gpus and pod.milli < MILLI:
            return (self.rng.choice(fitting_cards(node, pod.milli)),)
        return whole_cards(node, pod.gpus)


def tightest_fit(node: MilliNode, pod: MilliPod) -> tuple[int, ...]:
    """Whole cards: the lowest-index free ones; a share: its tightest card.

    >>> tightest_fit(MilliNode("T4", 0, 0, (1000, 600, 1000)), MilliPod(gpus=2, milli=1000))
    (0, 2)
    >>> tightest_fit(MilliNode("T4", 0, 0, (1000, 600, 1000)), MilliPod(gpus=1, milli=500))
    (1,)
    """
    if not pod.gpus:
        return ()
    if pod.milli >= MILLI:
        return whole_cards(node, pod.gpus)
    return (tightest_card(node, pod.milli),)


_RULES = {
    PaperPolicy.DOTPROD: dot_prod,
    PaperPolicy.GPUCLUSTERING: gpu_clustering,
    PaperPolicy.GPUPACKING: gpu_packing,
    PaperPolicy.BESTFIT: best_fit,
}


def placement_policy(
    policy: PaperPolicy,
    workload: MilliWorkload,
    rng: random.Random,
    cluster: Iterable[MilliNode] = (),
) -> Scored | RandomPlacement:
    """The policy's rules: FGD and FGD-balanced against `workload` (FGD-balanced's claims on
    the card models of `cluster`), Random drawing from `rng`."""
    if policy is PaperPolicy.RANDOM:
        return RandomPlacement(rng)
    if policy is PaperPolicy.FGD:
        return Fgd(workload)
    if policy is PaperPolicy.FGD_BALANCED:
        cards = Counter[str]()
        for node in cluster:
            cards[node.model] += len(node.free)
        return Balanced(workload, cards)
    return Heuristic(_RULES[policy])
