"""Scoring policies: binpack fills the busiest place first, spread the idlest.

Scores are fractions in floating point (HAMi's integer division scored every percentage
request as 0). Ties break by name so the same input always gives the same answer.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from vgpu.domain.device import Device, Usage
from vgpu.domain.errors import CodecError, PolicyError
from vgpu.domain.fragmentation.card_balanced import CardCounts
from vgpu.domain.fragmentation.cards import CardWorkload
from vgpu.domain.scoring_weights import DEFAULT_WEIGHTS, ScoringWeights, weights_from_annotations
from vgpu.domain.vendor import GPU_POLICY_ANNOTATION, NODE_POLICY_ANNOTATION

TOPOLOGY_AWARE = "topology-aware"


class Policy(StrEnum):
    """A node or GPU scheduling policy, as HAMi's annotations and settings name it: `binpack`
    fills the fullest node or card first, `spread` the emptiest, `fgd` (vgpu's own) the one
    that strands the fewest slices for the typical pod shapes, `fgd-balanced` (vgpu's own)
    likewise counting the slices a node's CPU and memory cannot serve and the card types
    pinned pods need."""

    BINPACK = "binpack"
    SPREAD = "spread"
    FGD = "fgd"  # fragmentation gradient descent (vgpu.domain.fragmentation), vgpu's own
    FGD_BALANCED = "fgd-balanced"  # vgpu.domain.fragmentation.balanced


FRAGMENTATION_POLICIES = frozenset({Policy.FGD, Policy.FGD_BALANCED})


@dataclass(frozen=True, slots=True)
class PodPolicies:
    """The node and card policy for one pod, plus HAMi's extra GPU-policy words and the
    card-scoring weights (`hami.io/device-scoring-weights`)."""

    node: Policy = Policy.BINPACK
    gpu: Policy = Policy.SPREAD
    numa: bool = False  # `numa` in the GPU policy list: keep a container's cards on one NUMA node
    idle_only: bool = False  # `mutex`: only cards nobody uses
    topology: bool = False  # `topology-aware`: choose among all fitting cards by NVLink scores
    weights: ScoringWeights = DEFAULT_WEIGHTS
    workload: CardWorkload | None = None  # the shapes FGD weighs (`plan_pod` sets them)
    cards: CardCounts = ()  # the cluster's cards per kind, for FGD-balanced (`plan_pod` sets them)

    @property
    def fragmentation(self) -> bool:
        """Whether FGD or FGD-balanced places the pod's node or cards."""
        return self.node in FRAGMENTATION_POLICIES or self.gpu in FRAGMENTATION_POLICIES

    @property
    def balanced(self) -> bool:
        """Whether FGD-balanced places the pod's node or cards."""
        return Policy.FGD_BALANCED in (self.node, self.gpu)


def parse_policy(text: str, field: str = "policy") -> Policy:
    try:
        return Policy(text.strip().lower())
    except ValueError:
        known = ", ".join(p.value for p in Policy)
        raise PolicyError(f"{field}={text!r} is not a known policy (use one of: {known})") from None


def pod_policies(annotations: Mapping[str, str], defaults: PodPolicies) -> PodPolicies:
    """Which policies apply to a pod: its `hami.io/node-scheduler-policy`,
    `hami.io/gpu-scheduler-policy` and `hami.io/device-scoring-weights` over `defaults`.

    The GPU annotation may be a comma list such as `binpack,numa`; `topology-aware` alone
    orders cards like `spread`, as HAMi does. PolicyError names the annotation at fault.

    >>> p = pod_policies({"hami.io/gpu-scheduler-policy": "binpack,topology-aware"}, PodPolicies())
    >>> p.gpu.value, p.topology, p.weights
    ('binpack', True, ScoringWeights(slot=1, core=1, memory=1))
    """
    node = defaults.node
    if raw := annotations.get(NODE_POLICY_ANNOTATION, "").strip():
        node = parse_policy(raw, NODE_POLICY_ANNOTATION)
    gpu, numa, idle_only = defaults.gpu, defaults.numa, defaults.idle_only
    topology = defaults.topology
    ordered = False
    for word in (w.strip().lower() for w in annotations.get(GPU_POLICY_ANNOTATION, "").split(",")):
        if word == "numa":
            numa = True
        elif word == "mutex":
            idle_only = True
        elif word == TOPOLOGY_AWARE:
            topology = True
        elif word:
            gpu, ordered = parse_policy(word, GPU_POLICY_ANNOTATION), True
    if topology and not ordered and GPU_POLICY_ANNOTATION in annotations:
        gpu = Policy.SPREAD  # HAMi orders a pod's `topology-aware` candidates like spread
    try:
        weights = weights_from_annotations(annotations)
    except CodecError as exc:
        raise PolicyError(str(exc)) from None
    if weights is DEFAULT_WEIGHTS:
        weights = defaults.weights
    return PodPolicies(node, gpu, numa, idle_only, topology, weights)


def fullness_of(
    slices: int, count: int, used_cores: int, cores: int, used_memory: int, memory: int
) -> float:
    """Slices, cores and memory in use as fractions of capacity, summed (0.0 .. 3.0).

    Plain integers in, because this runs for every card of every node on each filter call.
    """
    return _ratio(slices, count) + _ratio(used_cores, cores) + _ratio(used_memory, memory)


def card_score(device: Device, used: Usage, weights: ScoringWeights = DEFAULT_WEIGHTS) -> float:
    """HAMi's card score for `used` on `device`: 10 x the weighted used fractions of slots,
    cores and memory. `binpack` takes the highest first, `spread` the lowest.

    >>> card = Device("GPU-a", 0, "NVIDIA A100", count=4, memory=40000, cores=100)
    >>> card_score(card, Usage(slices=1, memory=10000, cores=50))
    10.0
    >>> card_score(card, Usage(slices=1, memory=10000, cores=50), ScoringWeights(0, 0, 4))
    10.0
    """
    return weighted_fullness(
        weights, used.slices, device.count, used.cores, device.cores, used.memory, device.memory
    )


def weighted_fullness(
    weights: ScoringWeights,
    slices: int,
    count: int,
    used_cores: int,
    cores: int,
    used_memory: int,
    memory: int,
) -> float:
    """`card_score` from plain integers (the fit's hot path)."""
    if weights is DEFAULT_WEIGHTS:  # most pods: skip the multiplications
        return 10 * fullness_of(slices, count, used_cores, cores, used_memory, memory)
    return weights.weigh(
        _ratio(slices, count), _ratio(used_cores, cores), _ratio(used_memory, memory)
    )


def preference(policy: Policy, full: float) -> float:
    """Higher is better: binpack prefers full, spread prefers empty. Under FGD, `full` is the
    node's FGD score scaled to 0..3 already."""
    return 3.0 - full if policy is Policy.SPREAD else full


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole > 0 else 0.0
