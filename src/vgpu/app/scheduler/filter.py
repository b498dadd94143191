"""The filter verb: choose the node (and cards) for a pod, or list the nodes that can take it.

Single-node mode reserves the cards in the ledger *before* answering (concurrent filters can
never over-commit a card), then writes the signed grant on the pod with a resourceVersion
precondition. If that write is refused the reservation is released; if its outcome is unknown
the reservation is kept (the cards' fate is not known) until the pod's events or the sweeper
settle it. Combined-scores mode writes nothing.
"""

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu.app.preconditioned_patch import Outcome
from vgpu.app.scheduler.context import VerbContext
from vgpu.app.scheduler.grants import grant_annotations, written_identity
from vgpu.domain import (
    Budget,
    ClusterNode,
    DomainError,
    NodeRejection,
    NodeView,
    NoPlacement,
    Placement,
    Pod,
    PodPlan,
    Reason,
    decide,
    encode_pod_grants,
    node_from_manifest,
)
from vgpu.domain.host import HostResources, node_allocatable

log = logging.getLogger(__name__)

FILTERING_SUCCEED = "FilteringSucceed"
FILTERING_FAILED = "FilteringFailed"
# characters of per-node reasons in a no-placement message, so that it fits an Event (1000);
# the reply (FailedNodes) has every node's
MESSAGE_NODES = 600


@dataclass(frozen=True, slots=True)
class FilterResult:
    """ExtenderFilterResult: survivors by name (`node_names`) or as objects (`nodes`)."""

    node_names: list[str] | None = None
    nodes: list[dict[str, Any]] | None = None
    failed: dict[str, str] = field(default_factory=dict)
    error: str = ""


class FilterVerb:
    def __init__(self, ctx: VerbContext) -> None:
        self._ctx = ctx

    def place_one(self, pod: Pod, plan: PodPlan, names: Sequence[str]) -> FilterResult:
        """Single-node mode: reserve, write the grant, answer the one node."""
        ctx, state = self._ctx, self._ctx.state
        now = ctx.clock()
        with state.locked():
            previous = state.reservation(plan.key)
            if state.release(plan.key, revoke=True):
                log.info("pod %s is scheduled again: its earlier reservation is released", plan.key)
            decision, broken = state.decide(plan, names)
            self._remember(plan, names, state.budget(plan.namespace))
            if isinstance(decision, Placement):
                annotations, labels = grant_annotations(
                    pod, decision.node, decision.grants, now, ctx.vendor, ctx.trust
                )
                try:
                    state.hold(
                        plan.key,
                        plan.namespace,
                        decision.node,
                        decision.grants,
                        plan.init_count,
                        strict=True,
                        host=plan.host,
                    )
                except DomainError as exc:  # cannot happen while decide and hold share the lock
                    log.error("pod %s: reservation refused: %s", plan.key, exc)
                    return FilterResult(error=f"internal error: {exc}")
                identity = written_identity(pod, annotations, ctx.vendor)
                state.reserve(
                    plan.key, decision.node, now, identity, own=True, written=annotations
                )
        failed = failed_nodes(broken, decision)
        if isinstance(decision, NoPlacement):
            if previous is not None:
                ctx.revoker.revoke(pod.namespace, pod.name, previous.signature)
            return self.no_placement(pod, names, decision, failed)
        written = ctx.writer.patch(pod, annotations, labels)
        if written.outcome is Outcome.UNKNOWN:
            message = (
                f"could not tell whether the placement of pod {plan.key} on {decision.node} was "
                f"written ({written.detail}); its reservation is kept until the cluster says"
            )
            log.warning("%s", message)
            return FilterResult(error=message)
        if written.outcome is Outcome.REFUSED:
            state.release(plan.key, revoke=True)
            if previous is not None:
                ctx.revoker.revoke(pod.namespace, pod.name, previous.signature)
            message = f"could not write the placement on pod {plan.key}: {written.detail}"
            log.warning("%s; reservation on %s released", message, decision.node)
            ctx.event(pod, FILTERING_FAILED, message, warning=True)
            return FilterResult(error=message)
        state.written(plan.key)
        allocated = annotations[ctx.vendor.allocated_annotation]
        log.info("pod %s -> %s %s", plan.key, decision.node, allocated)
        ctx.event(pod, FILTERING_SUCCEED, f"node {decision.node} chosen, {_cards(decision)}")
        return FilterResult(node_names=[decision.node], failed=failed)

    def list_all(self, pod: Pod, plan: PodPlan, names: Sequence[str]) -> FilterResult:
        """Combined-scores mode: every node that can take the pod; nothing is written."""
        state = self._ctx.state
        with state.locked():
            decision, broken = state.feasible(plan, names)
            budget = state.budget(plan.namespace, plan.key, plan.init_count)
        self._remember(plan, names, budget)
        failed = failed_nodes(broken, decision)
        if isinstance(decision, NoPlacement):
            return self.no_placement(pod, names, decision, failed)
        feasible = [s.node for s in decision.scores]
        self._ctx.event(pod, FILTERING_SUCCEED, f"{len(feasible)} nodes can take the pod")
        return FilterResult(node_names=feasible, failed=failed)

    def _remember(self, plan: PodPlan, names: Sequence[str], budget: Budget) -> None:
        if self._ctx.explanations is not None:
            self._ctx.explanations.record(plan, names, budget)

    def no_placement(
        self, pod: Pod, names: Sequence[str], decision: NoPlacement, failed: dict[str, str]
    ) -> FilterResult:
        if names:
            message = f"{decision.message}; {_listed(failed, MESSAGE_NODES)}"
            if self._ctx.explanations is not None:
                message = f"`vgpu explain {pod.key}` says what would make it fit. {message}"
        else:
            message = "no candidate nodes were sent"
        log.info("pod %s not placed: %s", pod.key, message)
        self._ctx.event(pod, FILTERING_FAILED, message, warning=True)
        return FilterResult(failed=failed)

    def simulate(self, plan: PodPlan, nodes: Sequence[Mapping[str, Any]]) -> FilterResult:
        """A cluster-autoscaler simulation: judge the node objects given, write nothing."""
        ctx = self._ctx
        views, broken, by_name = views_from_objects(ctx, nodes)
        budget = ctx.state.budget(plan.namespace, plan.key, plan.init_count)
        decision = decide(plan, views, budget)
        failed = failed_nodes(broken, decision)
        if isinstance(decision, NoPlacement):
            return FilterResult(failed=failed)
        chosen = [s.node for s in decision.scores] if ctx.config.combine_scores else [decision.node]
        return FilterResult(nodes=[dict(by_name[n]) for n in chosen], failed=failed)


def views_from_objects(
    ctx: VerbContext, nodes: Sequence[Mapping[str, Any]]
) -> tuple[list[NodeView], dict[str, NodeRejection], dict[str, Mapping[str, Any]]]:
    """Candidate views from node objects in a request body, with this scheduler's usage."""
    views: list[NodeView] = []
    broken: dict[str, NodeRejection] = {}
    by_name: dict[str, Mapping[str, Any]] = {}
    for item in nodes:
        node = node_from_manifest(item)
        by_name[node.name] = item
        try:
            devices = node.devices(ctx.vendor)
            cordoned = node.cordoned(ctx.vendor)
            scores = node.pair_scores()
        except DomainError as exc:
            broken[node.name] = NodeRejection(node.name, Reason.NODE_UNREGISTERED, str(exc))
            continue
        known = ctx.state.usage_view(node.name)
        host = known.host if known.host is not None else _allocatable(node)
        views.append(NodeView(node.name, tuple(devices), known.usage, cordoned, scores, host))
    return views, broken, by_name


def _allocatable(node: ClusterNode) -> HostResources | None:
    """A node the ledger does not know (an autoscaler's template): all its CPU is free."""
    try:
        return node_allocatable(node.allocatable)
    except DomainError:
        return None


def failed_nodes(
    broken: Mapping[str, NodeRejection], decision: Placement | NoPlacement
) -> dict[str, str]:
    """FailedNodes: every rejected node's `line`, by name (alike nodes share theirs)."""
    rejections: Mapping[str, NodeRejection] = decision.rejections
    if broken:
        rejections = {**rejections, **broken}
    return {name: rejections[name].line for name in sorted(rejections)}


def _listed(failed: Mapping[str, str], limit: int) -> str:
    """`node: reason; ...` for the first nodes, about `limit` characters, then how many more."""
    parts: list[str] = []
    size = 0
    for node, why in failed.items():
        if size > limit:
            return "; ".join(parts) + f"; and {len(failed) - len(parts)} more nodes"
        parts.append(f"{node}: {why}")
        size += len(parts[-1]) + 2
    return "; ".join(parts)


def _cards(decision: Placement) -> str:
    return "cards " + (encode_pod_grants(decision.grants) or "none")
