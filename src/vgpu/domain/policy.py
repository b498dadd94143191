"""Scoring policies: binpack fills the busiest place first, spread the idlest.

Scores are fractions in floating point (HAMi's integer division scored every percentage
request as 0). Ties break by name so the same input always gives the same answer.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from vgpu.domain.errors import PolicyError
from vgpu.domain.vendor import GPU_POLICY_ANNOTATION, NODE_POLICY_ANNOTATION


class Policy(StrEnum):
    BINPACK = "binpack"
    SPREAD = "spread"


@dataclass(frozen=True, slots=True)
class PodPolicies:
    """The node and card policy for one pod, plus HAMi's extra GPU-policy words."""

    node: Policy = Policy.BINPACK
    gpu: Policy = Policy.SPREAD
    numa: bool = False  # `numa` in the GPU policy list: keep a container's cards on one NUMA node
    idle_only: bool = False  # `mutex`: only cards nobody uses


def parse_policy(text: str, field: str = "policy") -> Policy:
    try:
        return Policy(text.strip().lower())
    except ValueError:
        known = ", ".join(p.value for p in Policy)
        raise PolicyError(f"{field}={text!r} is not a known policy (use one of: {known})") from None


def pod_policies(annotations: Mapping[str, str], defaults: PodPolicies) -> PodPolicies:
    """Apply `hami.io/node-scheduler-policy` and `hami.io/gpu-scheduler-policy` overrides.

    The GPU annotation may be a comma list such as `binpack,numa`.
    """
    node = defaults.node
    if raw := annotations.get(NODE_POLICY_ANNOTATION, "").strip():
        node = parse_policy(raw, NODE_POLICY_ANNOTATION)
    gpu, numa, idle_only = defaults.gpu, defaults.numa, defaults.idle_only
    for word in (w.strip().lower() for w in annotations.get(GPU_POLICY_ANNOTATION, "").split(",")):
        if word == "numa":
            numa = True
        elif word == "mutex":
            idle_only = True
        elif word:
            gpu = parse_policy(word, GPU_POLICY_ANNOTATION)
    return PodPolicies(node=node, gpu=gpu, numa=numa, idle_only=idle_only)


def fullness_of(
    slices: int, count: int, used_cores: int, cores: int, used_memory: int, memory: int
) -> float:
    """Slices, cores and memory in use as fractions of capacity, summed (0.0 .. 3.0).

    Plain integers in, because this runs for every card of every node on each filter call.
    """
    return _ratio(slices, count) + _ratio(used_cores, cores) + _ratio(used_memory, memory)


def preference(policy: Policy, full: float) -> float:
    """Higher is better: binpack prefers full, spread prefers empty."""
    return full if policy is Policy.BINPACK else 3.0 - full


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole > 0 else 0.0
