"""The scheduler's use cases: admit, filter, prioritize and bind a pod.

Two placement modes (`combine_scores` in the config):

- single node (HAMi's behaviour, the default): filter picks the node and the cards, reserves
  them in the ledger *before* answering (so concurrent filters can never over-commit a card),
  writes HAMi's pod annotations, signed, and answers with that one node. Bind binds.
- combined scores (HAMi issue #2264): filter answers every node that can take the pod and
  writes nothing; prioritize scores them 0..10 so kube-scheduler can weigh our preference
  against its own plugins; bind picks the cards on the node kube-scheduler chose, reserves
  them, writes the annotations and binds.

Filter and bind act on the cluster's copy of the pod, not the request body (context.py), one
verb at a time per pod; the verbs themselves live in filter.py and bind.py. Only the leader
answers them, and every write is fenced again (fence.py).
"""

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu.app.scheduler.bind import BindVerb
from vgpu.app.scheduler.context import VerbContext
from vgpu.app.scheduler.filter import (
    FILTERING_FAILED,
    FilterResult,
    FilterVerb,
    views_from_objects,
)
from vgpu.app.scheduler.shapes import ShapeWindow
from vgpu.domain import (
    AdmissionDecision,
    DomainError,
    Placement,
    Pod,
    PodPlan,
    admit,
    decide,
    extender_scores,
    node_from_manifest,
    plan_pod,
    pod_from_manifest,
)

__all__ = ["FilterResult", "PrioritizeResult", "SchedulerService"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PrioritizeResult:
    scores: list[tuple[str, int]] = field(default_factory=list)
    error: str = ""


class SchedulerService:
    """Admission, filter, prioritize and bind against the cluster and the shared state, with
    the collaborators in `ctx` (built by the container, as are the verbs).

    `remember_pod` (fake-cluster mode) creates the pods the scheduler is asked about; `shapes`
    is the window of recent pod shapes FGD weighs, fed by each filter."""

    def __init__(
        self,
        ctx: VerbContext,
        filter_verb: FilterVerb,
        bind_verb: BindVerb,
        remember_pod: Callable[[Pod], None] | None = None,
        shapes: ShapeWindow | None = None,
    ) -> None:
        self._ctx = ctx
        self._filter = filter_verb
        self._bind = bind_verb
        self._admission = ctx.config.admission()
        self._remember_pod = remember_pod
        self._shapes = shapes

    # admission -------------------------------------------------------------------------------
    def admit(self, manifest: Mapping[str, Any], namespace: str) -> AdmissionDecision:
        """The webhook's answer for a pod being created in `namespace`."""
        try:
            pod = pod_from_manifest(manifest)
        except DomainError as exc:
            return AdmissionDecision(False, f"malformed pod: {exc}")
        return admit(manifest, self._admission, self._ctx.state.budget(namespace or pod.namespace))

    # filter ----------------------------------------------------------------------------------
    def filter(
        self,
        manifest: Mapping[str, Any],
        node_names: Sequence[str] | None,
        nodes: Sequence[Mapping[str, Any]] | None,
    ) -> FilterResult:
        """Pick (or, with combined scores, list) the nodes that can take the pod."""
        ctx = self._ctx
        try:
            claimed = pod_from_manifest(manifest)
        except DomainError as exc:
            return FilterResult(error=f"malformed pod: {exc}")
        if nodes is not None:  # an autoscaler's what-if: judged on the body, nothing written
            plan, error = self._plan(claimed, events=False)
            if error or plan is None:
                return FilterResult(error=error, nodes=None if error else [dict(n) for n in nodes])
            return self._filter.simulate(plan, nodes)
        if unready := ctx.unready():
            return FilterResult(error=unready)
        if self._remember_pod is not None:
            self._remember_pod(claimed)
        with ctx.pod_locks.hold(claimed.key):
            pod = ctx.cluster_pod(claimed.namespace, claimed.name, claimed.uid, "filter")
            if isinstance(pod, str):
                return FilterResult(error=pod)
            if pod.node_name:
                return FilterResult(error=f"pod {pod.key} is already bound to {pod.node_name}")
            plan, error = self._plan(pod, events=True)
            if error:
                return FilterResult(error=error)
            if plan is None:
                return FilterResult(node_names=None if node_names is None else list(node_names))
            if self._shapes is not None:
                self._shapes.observe(plan)
            if ctx.config.combine_scores:
                return self._filter.list_all(pod, plan, node_names or [])
            return self._filter.place_one(pod, plan, node_names or [])

    # prioritize ------------------------------------------------------------------------------
    def prioritize(
        self,
        manifest: Mapping[str, Any],
        node_names: Sequence[str] | None,
        nodes: Sequence[Mapping[str, Any]] | None,
    ) -> PrioritizeResult:
        """Score every candidate 0..10 (feasible nodes by policy, the others 0). Writes nothing."""
        try:
            pod = pod_from_manifest(manifest)
        except DomainError as exc:
            return PrioritizeResult(error=f"malformed pod: {exc}")
        plan, error = self._plan(pod, events=False)
        if error:
            return PrioritizeResult(error=error)
        if nodes is not None:
            names = [node_from_manifest(n).name for n in nodes]
        else:
            names = list(node_names or [])
        if plan is None:
            return PrioritizeResult([(n, 0) for n in names])
        state = self._ctx.state
        with state.locked():  # the views share the ledger's usage
            if nodes is not None:
                views, _, _ = views_from_objects(self._ctx, nodes)
                budget = state.budget(plan.namespace, plan.key, plan.init_count)
                decision = decide(plan, views, budget)
            else:
                decision, _ = state.feasible(plan, names)
        scores = {}
        if isinstance(decision, Placement):
            scores = extender_scores(decision.scores)
        return PrioritizeResult([(n, scores.get(n, 0)) for n in names])

    # bind ------------------------------------------------------------------------------------
    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Lock the node, mark the pod allocating and bind it; returns the error ('' if none)."""
        ctx = self._ctx
        if unready := ctx.unready():
            return unready
        with ctx.pod_locks.hold(f"{namespace}/{name}"):
            pod = ctx.cluster_pod(namespace, name, uid, "bind")
            if isinstance(pod, str):
                return pod
            if pod.node_name:
                if pod.node_name == node:
                    return ""
                return f"pod {pod.key} is already bound to {pod.node_name}"
            if pod.phase != "Pending":
                return f"pod {pod.key} is {pod.phase}, not Pending; it cannot be bound"
            return self._bind.bind(pod, node)

    # helpers ---------------------------------------------------------------------------------
    def _plan(self, pod: Pod, *, events: bool) -> tuple[PodPlan | None, str]:
        try:
            return plan_pod(pod, self._ctx.scheduling), ""
        except DomainError as exc:
            message = f"pod {pod.key} cannot be scheduled: {exc}"
            if events:
                self._ctx.event(pod, FILTERING_FAILED, message, warning=True)
            return None, message
