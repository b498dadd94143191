"""The scheduler's use cases: admit, filter, prioritize and bind a pod.

Two placement modes (`combine_scores` in the config):

- single node (HAMi's behaviour, the default): filter picks the node and the cards, reserves
  them in the ledger *before* answering (so concurrent filters can never over-commit a card),
  writes HAMi's pod annotations and answers with that one node. Bind binds.
- combined scores (HAMi issue #2264): filter answers every node that can take the pod and
  writes nothing; prioritize scores them 0..10 so kube-scheduler can weigh our preference
  against its own plugins; bind picks the cards on the node kube-scheduler chose, reserves
  them, writes the annotations and binds.
"""

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from vgpu.app.scheduler.config import SchedulerConfig
from vgpu.app.scheduler.follower import grant_signature
from vgpu.app.scheduler.state import SchedulerState
from vgpu.domain import (
    AdmissionDecision,
    DomainError,
    NodeRejection,
    NodeView,
    NoPlacement,
    Placement,
    Pod,
    PodGrants,
    PodPlan,
    Reason,
    Vendor,
    admit,
    decide,
    encode_pod_grants,
    node_from_manifest,
    plan_pod,
    pod_from_manifest,
)
from vgpu.domain.vendor import (
    ASSIGNED_NODE_ANNOTATION,
    ASSIGNED_TIME_ANNOTATION,
    BIND_PHASE_ANNOTATION,
    BIND_TIME_ANNOTATION,
)
from vgpu.ports.cluster import ClusterError, ClusterPort

log = logging.getLogger(__name__)

FILTERING_SUCCEED = "FilteringSucceed"
FILTERING_FAILED = "FilteringFailed"
BINDING_SUCCEED = "BindingSucceed"
BINDING_FAILED = "BindingFailed"
_EVENT_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class FilterResult:
    """ExtenderFilterResult: survivors by name (`node_names`) or as objects (`nodes`)."""

    node_names: list[str] | None = None
    nodes: list[dict[str, Any]] | None = None
    failed: dict[str, str] = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True, slots=True)
class PrioritizeResult:
    scores: list[tuple[str, int]] = field(default_factory=list)
    error: str = ""


class SchedulerService:
    """Admission, filter, prioritize and bind against a ClusterPort and the shared state."""

    def __init__(
        self,
        cluster: ClusterPort,
        state: SchedulerState,
        config: SchedulerConfig,
        is_leader: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.time,
        remember_pod: Callable[[Pod], None] | None = None,
    ) -> None:
        self._cluster = cluster
        self._state = state
        self._config = config
        self._scheduling = config.scheduling()
        self._admission = config.admission()
        self._vendor = self._scheduling.vendor
        self._is_leader = is_leader
        self._clock = clock
        self._remember_pod = remember_pod

    # admission -------------------------------------------------------------------------------
    def admit(self, manifest: Mapping[str, Any], namespace: str) -> AdmissionDecision:
        """The webhook's answer for a pod being created in `namespace`."""
        try:
            pod = pod_from_manifest(manifest)
        except DomainError as exc:
            return AdmissionDecision(False, f"malformed pod: {exc}")
        return admit(manifest, self._admission, self._state.budget(namespace or pod.namespace))

    # filter ----------------------------------------------------------------------------------
    def filter(
        self,
        manifest: Mapping[str, Any],
        node_names: Sequence[str] | None,
        nodes: Sequence[Mapping[str, Any]] | None,
    ) -> FilterResult:
        """Pick (or, with combined scores, list) the nodes that can take the pod."""
        pod, plan, error = self._plan(manifest)
        if error:
            return FilterResult(error=error)
        assert pod is not None
        if plan is None:
            return FilterResult(
                node_names=None if node_names is None else list(node_names),
                nodes=None if nodes is None else [dict(n) for n in nodes],
            )
        if nodes is not None:
            return self._simulate(plan, nodes)
        if unready := self._unready():
            return FilterResult(error=unready)
        if self._config.combine_scores:
            return self._filter_all(pod, plan, node_names or [])
        return self._filter_one(pod, plan, node_names or [])

    def _filter_one(self, pod: Pod, plan: PodPlan, names: Sequence[str]) -> FilterResult:
        if self._remember_pod is not None:
            self._remember_pod(pod)
        state = self._state
        now = self._clock()
        with state.locked():
            if not pod.node_name and state.release(plan.key, revoke=True):
                log.info("pod %s is scheduled again: its earlier reservation is released", plan.key)
            views, broken = state.views(names)
            decision = decide(plan, views, state.budget(plan.namespace))
            if isinstance(decision, Placement):
                annotations, labels = self._grant_annotations(decision.node, decision.grants, now)
                try:
                    state.hold(
                        plan.key,
                        plan.namespace,
                        decision.node,
                        decision.grants,
                        plan.init_count,
                        strict=True,
                    )
                except DomainError as exc:  # cannot happen while decide and hold share the lock
                    log.error("pod %s: reservation refused: %s", plan.key, exc)
                    return FilterResult(error=f"internal error: {exc}")
                state.reserve(plan.key, decision.node, now, _signature(annotations, self._vendor))
        failed = _failed(broken, decision)
        if isinstance(decision, NoPlacement):
            return self._no_placement(pod, names, decision, failed)
        try:
            self._cluster.patch_pod_annotations(pod.namespace, pod.name, annotations, labels)
        except ClusterError as exc:
            state.release(plan.key, revoke=True)
            message = f"could not write the placement on pod {plan.key}: {exc}"
            log.warning("%s; reservation on %s released", message, decision.node)
            self._event(pod, FILTERING_FAILED, message, warning=True)
            return FilterResult(error=message)
        log.info(
            "pod %s -> %s %s",
            plan.key,
            decision.node,
            annotations[self._vendor.allocated_annotation],
        )
        self._event(pod, FILTERING_SUCCEED, f"node {decision.node} chosen, {_cards(decision)}")
        return FilterResult(node_names=[decision.node], failed=failed)

    def _filter_all(self, pod: Pod, plan: PodPlan, names: Sequence[str]) -> FilterResult:
        views, broken = self._state.views(names, exclude_pod=plan.key)
        budget = self._state.budget(plan.namespace, plan.key, plan.init_count)
        decision = decide(plan, views, budget)
        failed = _failed(broken, decision)
        if isinstance(decision, NoPlacement):
            return self._no_placement(pod, names, decision, failed)
        feasible = [s.node for s in decision.scores]
        self._event(pod, FILTERING_SUCCEED, f"{len(feasible)} nodes can take the pod")
        return FilterResult(node_names=feasible, failed=failed)

    def _no_placement(
        self, pod: Pod, names: Sequence[str], decision: NoPlacement, failed: dict[str, str]
    ) -> FilterResult:
        if names:
            message = decision.message + "; " + "; ".join(f"{n}: {r}" for n, r in failed.items())
        else:
            message = "no candidate nodes were sent"
        log.info("pod %s not placed: %s", pod.key, message)
        self._event(pod, FILTERING_FAILED, message, warning=True)
        return FilterResult(failed=failed)

    def _simulate(self, plan: PodPlan, nodes: Sequence[Mapping[str, Any]]) -> FilterResult:
        """A cluster-autoscaler simulation: judge the node objects given, write nothing."""
        views, broken, by_name = self._views_from_objects(nodes)
        budget = self._state.budget(plan.namespace, plan.key, plan.init_count)
        decision = decide(plan, views, budget)
        failed = _failed(broken, decision)
        if isinstance(decision, NoPlacement):
            return FilterResult(failed=failed)
        chosen = (
            [s.node for s in decision.scores] if self._config.combine_scores else [decision.node]
        )
        return FilterResult(nodes=[dict(by_name[n]) for n in chosen], failed=failed)

    def _views_from_objects(
        self, nodes: Sequence[Mapping[str, Any]]
    ) -> tuple[list[NodeView], dict[str, NodeRejection], dict[str, Mapping[str, Any]]]:
        views: list[NodeView] = []
        broken: dict[str, NodeRejection] = {}
        by_name: dict[str, Mapping[str, Any]] = {}
        for item in nodes:
            node = node_from_manifest(item)
            by_name[node.name] = item
            try:
                devices = node.devices(self._vendor)
                cordoned = node.cordoned(self._vendor)
            except DomainError as exc:
                broken[node.name] = NodeRejection(node.name, Reason.NODE_UNREGISTERED, str(exc))
                continue
            usage = self._state.usage_view(node.name).usage
            views.append(NodeView(node.name, tuple(devices), usage, cordoned))
        return views, broken, by_name

    # prioritize ------------------------------------------------------------------------------
    def prioritize(
        self,
        manifest: Mapping[str, Any],
        node_names: Sequence[str] | None,
        nodes: Sequence[Mapping[str, Any]] | None,
    ) -> PrioritizeResult:
        """Score every candidate 0..10 (feasible nodes by policy, the others 0). Writes nothing."""
        _, plan, error = self._plan(manifest)
        if error:
            return PrioritizeResult(error=error)
        if nodes is not None:
            names = [node_from_manifest(n).name for n in nodes]
        else:
            names = list(node_names or [])
        if plan is None:
            return PrioritizeResult([(n, 0) for n in names])
        if nodes is not None:
            views, _, _ = self._views_from_objects(nodes)
        else:
            views, _ = self._state.views(names, exclude_pod=plan.key)
        budget = self._state.budget(plan.namespace, plan.key, plan.init_count)
        decision = decide(plan, views, budget)
        scores = {}
        if isinstance(decision, Placement):
            scores = {s.node: s.extender_score for s in decision.scores}
        return PrioritizeResult([(n, scores.get(n, 0)) for n in names])

    # bind ------------------------------------------------------------------------------------
    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Lock the node, mark the pod allocating and bind it; returns the error ('' if none)."""
        if unready := self._unready():
            return unready
        key = f"{namespace}/{name}"
        try:
            pod = self._cluster.get_pod(namespace, name)
        except ClusterError as exc:
            return f"cannot read pod {key}: {exc}"
        if pod is None:
            return f"pod {key} not found"
        if uid and pod.uid and uid != pod.uid:
            return f"pod {key} has uid {pod.uid}, the bind request names {uid}"
        if pod.node_name:
            if pod.node_name == node:
                return ""
            return f"pod {key} is already bound to {pod.node_name}"
        try:
            plan = plan_pod(pod, self._scheduling)
        except DomainError as exc:
            return self._bind_failed(pod, node, f"pod {key} cannot be scheduled: {exc}")
        if plan is None:
            return self._bind_plain(pod, uid, node)
        if self._config.combine_scores:
            chosen = self._reserve_on(pod, plan, node)
            if isinstance(chosen, str):
                return self._bind_failed(pod, node, chosen)
            annotations, labels = chosen
        else:
            with self._state.locked():
                allocation = self._state.ledger.allocation(key)
                if allocation is not None and allocation.node == node:
                    self._state.start_binding(key)
            if allocation is None or allocation.node != node:
                held = (
                    "it holds none: filter did not place it, or the reservation expired"
                    if allocation is None
                    else f"its cards are reserved on {allocation.node}"
                )
                return self._bind_failed(
                    pod,
                    node,
                    f"pod {key} has no GPU reservation on {node} ({held}); "
                    "it will be scheduled again",
                )
            annotations, labels = {}, {}
        return self._bind_locked(pod, uid, node, annotations, labels)

    def _reserve_on(
        self, pod: Pod, plan: PodPlan, node: str
    ) -> tuple[dict[str, str], dict[str, str]] | str:
        state = self._state
        now = self._clock()
        with state.locked():
            state.release(plan.key, revoke=True)
            views, broken = state.views([node])
            decision = decide(plan, views, state.budget(plan.namespace))
            if isinstance(decision, NoPlacement):
                rejection = broken.get(node) or decision.rejections.get(node)
                why = _reason(rejection) if rejection else "unknown node"
                return f"pod {plan.key} no longer fits on {node}: {why}"
            annotations, labels = self._grant_annotations(node, decision.grants, now)
            try:
                state.hold(
                    plan.key, plan.namespace, node, decision.grants, plan.init_count, strict=True
                )
            except DomainError as exc:
                return f"internal error: {exc}"
            state.reserve(plan.key, node, now, _signature(annotations, self._vendor))
            state.start_binding(plan.key)
        return annotations, labels

    def _bind_locked(
        self, pod: Pod, uid: str, node: str, annotations: dict[str, str], labels: dict[str, str]
    ) -> str:
        state = self._state
        expiry = timedelta(seconds=self._config.lock_expiry)
        locked = False
        try:
            self._cluster.lock_node(node, pod.namespace, pod.name, expiry)
            locked = True
            marks = {
                **annotations,
                BIND_PHASE_ANNOTATION: "allocating",
                BIND_TIME_ANNOTATION: str(int(self._clock())),
            }
            self._cluster.patch_pod_annotations(pod.namespace, pod.name, marks, labels or None)
            self._cluster.bind(pod.namespace, pod.name, uid or pod.uid, node)
        except ClusterError as exc:
            if locked:
                try:
                    self._cluster.release_node_lock(node, pod.namespace, pod.name)
                except ClusterError as release_error:
                    log.warning("node %s: lock not released: %s", node, release_error)
            state.release(pod.key, revoke=True)
            return self._bind_failed(
                pod, node, f"binding {pod.key} to {node} failed: {exc}; GPU reservation released"
            )
        state.bound(pod.key)
        log.info("pod %s bound to %s", pod.key, node)
        self._event(pod, BINDING_SUCCEED, f"bound to {node}")
        return ""

    def _bind_plain(self, pod: Pod, uid: str, node: str) -> str:
        try:
            self._cluster.bind(pod.namespace, pod.name, uid or pod.uid, node)
        except ClusterError as exc:
            return self._bind_failed(pod, node, f"binding {pod.key} to {node} failed: {exc}")
        self._event(pod, BINDING_SUCCEED, f"bound to {node}")
        return ""

    def _bind_failed(self, pod: Pod, node: str, message: str) -> str:
        log.warning("%s", message)
        self._event(pod, BINDING_FAILED, message, warning=True)
        return message

    # helpers ---------------------------------------------------------------------------------
    def _plan(self, manifest: Mapping[str, Any]) -> tuple[Pod | None, PodPlan | None, str]:
        try:
            pod = pod_from_manifest(manifest)
        except DomainError as exc:
            return None, None, f"malformed pod: {exc}"
        try:
            return pod, plan_pod(pod, self._scheduling), ""
        except DomainError as exc:
            message = f"pod {pod.key} cannot be scheduled: {exc}"
            self._event(pod, FILTERING_FAILED, message, warning=True)
            return pod, None, message

    def _unready(self) -> str:
        if not self._state.synced:
            return "the scheduler is still reading the cluster; try again shortly"
        if not self._is_leader():
            return "this scheduler replica is not the leader; it does not schedule"
        return ""

    def _grant_annotations(
        self, node: str, grants: PodGrants, now: float
    ) -> tuple[dict[str, str], dict[str, str]]:
        encoded = encode_pod_grants(grants)
        annotations = {
            ASSIGNED_NODE_ANNOTATION: node,
            ASSIGNED_TIME_ANNOTATION: str(int(now)),
            self._vendor.to_allocate_annotation: encoded,
            self._vendor.allocated_annotation: encoded,
        }
        return annotations, {ASSIGNED_NODE_ANNOTATION: node}

    def _event(self, pod: Pod, reason: str, message: str, *, warning: bool = False) -> None:
        if len(message) > _EVENT_LIMIT:
            message = message[: _EVENT_LIMIT - 3] + "..."
        try:
            self._cluster.record_event(pod.namespace, pod.name, reason, message, warning=warning)
        except Exception as exc:  # an event is a courtesy; it must never fail scheduling
            log.warning("event %s for pod %s not recorded: %s", reason, pod.key, exc)


def _signature(annotations: Mapping[str, str], vendor: Vendor) -> str:
    return grant_signature(
        annotations[ASSIGNED_NODE_ANNOTATION],
        annotations[ASSIGNED_TIME_ANNOTATION],
        annotations[vendor.allocated_annotation],
    )


def _reason(rejection: NodeRejection) -> str:
    """A person's sentence first, HAMi's reason tokens in brackets for tools that grep them."""
    return f"{rejection.message} [{rejection.hami_reason}]"


def _failed(
    broken: Mapping[str, NodeRejection], decision: Placement | NoPlacement
) -> dict[str, str]:
    rejections = {**decision.rejections, **broken}
    return {name: _reason(r) for name, r in sorted(rejections.items())}


def _cards(decision: Placement) -> str:
    return "cards " + (encode_pod_grants(decision.grants) or "none")
