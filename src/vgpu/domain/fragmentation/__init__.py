"""Fewer stranded GPU slices: the FGD paper's cluster model (milli-GPU), its placement
policies (Random, DotProd, GpuClustering, GpuPacking, BestFit, FGD), vgpu's FGD-balanced and
the typical pod shapes FGD measures fragmentation against. Pure, standard library only, shared
by `vgpu simulate`'s trace replay and the scheduler."""

from vgpu.domain.fragmentation.balanced import Balanced, BalancedTable, claims, expected_waste
from vgpu.domain.fragmentation.classic import best_fit, dot_prod, gpu_clustering, gpu_packing
from vgpu.domain.fragmentation.fgd import Fgd
from vgpu.domain.fragmentation.milli import (
    MILLI,
    SHARE,
    MilliNode,
    MilliPod,
    fits,
    fitting_cards,
    place,
    tightest_card,
    whole_cards,
)
from vgpu.domain.fragmentation.policies import (
    Heuristic,
    PaperPolicy,
    RandomPlacement,
    Scored,
    parse_paper_policy,
    placement_policy,
    tightest_fit,
)
from vgpu.domain.fragmentation.workload import (
    MilliWorkload,
    ShapeTable,
    TypicalShape,
    typical_shapes,
)

__all__ = [
    "MILLI",
    "SHARE",
    "Balanced",
    "BalancedTable",
    "Fgd",
    "Heuristic",
    "MilliNode",
    "MilliPod",
    "MilliWorkload",
    "PaperPolicy",
    "RandomPlacement",
    "Scored",
    "ShapeTable",
    "TypicalShape",
    "best_fit",
    "claims",
    "dot_prod",
    "expected_waste",
    "fits",
    "fitting_cards",
    "gpu_clustering",
    "gpu_packing",
    "parse_paper_policy",
    "place",
    "placement_policy",
    "tightest_card",
    "tightest_fit",
    "typical_shapes",
    "whole_cards",
]
