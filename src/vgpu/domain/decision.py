"""Choose a node and cards for a pod among candidate nodes. Pure and deterministic."""

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter

from vgpu.domain.fit import NodeFit, NodeView, PodPlan, fit_pod
from vgpu.domain.fragmentation.card_balanced import CardCounts
from vgpu.domain.fragmentation.cards import CardWorkload, pod_workload
from vgpu.domain.grant import PodGrants
from vgpu.domain.host import pod_host_request
from vgpu.domain.pod import Pod
from vgpu.domain.policy import PodPolicies, pod_policies, preference
from vgpu.domain.quota import UNLIMITED, Budget
from vgpu.domain.reasons import NodeRejection, phrase
from vgpu.domain.request import RequestDefaults, parse_request
from vgpu.domain.selectors import selector_from_annotations
from vgpu.domain.vendor import NVIDIA, Vendor


@dataclass(frozen=True, slots=True)
class SchedulingConfig:
    """Cluster-wide settings the rules need: vendor names, request defaults, default policies."""

    vendor: Vendor = NVIDIA
    defaults: RequestDefaults = field(default_factory=RequestDefaults)
    policies: PodPolicies = field(default_factory=PodPolicies)
    # the pod shapes FGD weighs now (a scheduler's RecentShapes.current); without it, a pod
    # placed by FGD weighs its own shape
    recent_shapes: Callable[[], CardWorkload] | None = None
    # the cluster's cards per kind now (a scheduler's Ledger.card_counts), whose types
    # FGD-balanced's claims price; without it no card type is claimed
    card_counts: Callable[[], CardCounts] | None = None


MAX_EXTENDER_PRIORITY = 10  # kube-scheduler's extender scores are integers 0..10


@dataclass(frozen=True, slots=True)
class NodeScore:
    """How much the pod's node policy likes a node that fits it, 0.0 to 3.0, higher better."""

    node: str
    score: float  # higher is better under the pod's node policy, 0.0 .. 3.0


def extender_scores(scores: Sequence[NodeScore]) -> dict[str, int]:
    """The 0..10 integers kube-scheduler's extender protocol expects, for `scores` ranked best
    first (ties by name, as `decide` ranks them). The node `decide` would choose gets 10 alone;
    the others step down one per distinct score below it (nodes tying with the best but losing
    on name get 9), to 0. The policy's own scores have far more levels than 11 (FGD's 100, and
    the others' are fractions): a linear map would tie the best node with many others, which
    kube-scheduler then draws among at random.

    >>> ranked = [NodeScore(n, s) for n, s in (("a", 1.5), ("b", 1.5), ("c", 1.47), ("d", 0.1))]
    >>> extender_scores(ranked)
    {'a': 10, 'b': 9, 'c': 8, 'd': 7}
    """
    result: dict[str, int] = {}
    level, last = MAX_EXTENDER_PRIORITY + 1, None
    for position, entry in enumerate(scores):
        if position <= 1 or entry.score != last:
            level = max(level - 1, 0)
            last = entry.score
        result[entry.node] = level
    return result


@dataclass(frozen=True, slots=True)
class Placement:
    """The pod goes to `node` with these per-container grants.

    `scores` ranks every feasible node, best first; `rejections` says why the others failed.
    """

    node: str
    grants: PodGrants
    scores: tuple[NodeScore, ...]
    rejections: dict[str, NodeRejection] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NoPlacement:
    """No candidate node can take the pod; `rejections` says why, node by node."""

    rejections: dict[str, NodeRejection]

    @property
    def message(self) -> str:
        """kube-scheduler style: `0/3 nodes are available: 2 insufficient memory, 1 ...`."""
        total = len(self.rejections)
        counts: Counter[str] = Counter()
        for reason, n in Counter(map(_reason, self.rejections.values())).items():
            counts[phrase(reason)] += n
        parts = ", ".join(
            f"{n} {p}" for p, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        return f"0/{total} nodes are available" + (f": {parts}" if parts else "")


Decision = Placement | NoPlacement
"""What `decide` answers: where the pod goes, or why it fits nowhere."""
_reason = attrgetter("reason")


def plan_pod(pod: Pod, config: SchedulingConfig) -> PodPlan | None:
    """Parse the pod's GPU needs once; None when no container asks for this vendor's GPUs.

    Raises RequestError for a bad quantity and PolicyError for an unknown policy annotation.
    """
    requests = tuple(parse_request(c, config.vendor, config.defaults) for c in pod.containers)
    if all(r is None for r in requests):
        return None
    host = pod_host_request(pod)
    selector = selector_from_annotations(pod.annotations, config.vendor)
    policies = pod_policies(pod.annotations, config.policies)
    if policies.fragmentation:
        recent = config.recent_shapes
        workload = recent() if recent is not None else pod_workload(requests, selector)
        policies = replace(policies, workload=workload)
    if policies.balanced and config.card_counts is not None:
        policies = replace(policies, cards=config.card_counts())
    return PodPlan(
        key=pod.key,
        namespace=pod.namespace,
        containers=tuple(c.name for c in pod.containers),
        requests=requests,
        init_count=pod.init_count,
        selector=selector,
        policies=policies,
        vendor=config.vendor.word,
        host=host,
    )


def decide(plan: PodPlan, nodes: Iterable[NodeView], budget: Budget = UNLIMITED) -> Decision:
    """Fit the pod on every candidate and pick the best under its node policy.

    Ties break by node name, so the same input always gives the same node.
    """
    fits: list[NodeFit] = []
    rejections: dict[str, NodeRejection] = {}
    for node in nodes:
        result = fit_pod(plan, node, budget)
        if isinstance(result, NodeRejection):
            rejections[node.name] = result
        else:
            fits.append(result)
    if not fits:
        return NoPlacement(rejections)
    scored = sorted(
        ((NodeScore(f.node, preference(plan.policies.node, f.fullness)), f) for f in fits),
        key=lambda pair: (-pair[0].score, pair[0].node),
    )
    best = scored[0][1]
    return Placement(best.node, best.grants, tuple(s for s, _ in scored), rejections)
