"""The bind verb: check the reservation, lock the node, mark the pod allocating, bind.

Before anything is written, the pod's reserved grant must still fit its node beside every other
pod's (the pod itself left out): kube-scheduler may have its filter answer from one replica and
ask another to bind, and a grant may have been counted since that leaves no room. If it does not
fit, the bind is refused and the reservation released and revoked. The node lock's patch also
records the grant in the node's occupancy record (recorder.py), before the Binding exists.

Every step's failure is judged by what the API says. A clear refusal releases the node lock and
the reservation (and takes the grant off the pod, durably). An ambiguous Binding failure
(timeout, reset, 5xx) is settled by reading the pod live: bound to this node is success, not
bound is failure. When even that read fails, the reservation is kept (the cards' fate is
unknown) and the pod's events or the sweeper settle it.
"""

import logging
from datetime import timedelta

from vgpu.app.preconditioned_patch import Notes, Outcome
from vgpu.app.scheduler.context import VerbContext
from vgpu.app.scheduler.grants import grant_annotations, written_claim, written_identity
from vgpu.app.scheduler.trust import grant_identity
from vgpu.domain import DomainError, NoPlacement, Pod, PodPlan, decide, plan_pod
from vgpu.domain.vendor import BIND_PHASE_ANNOTATION, BIND_TIME_ANNOTATION
from vgpu.ports.cluster import ClusterError, Rejected

log = logging.getLogger(__name__)

BINDING_SUCCEED = "BindingSucceed"
BINDING_FAILED = "BindingFailed"


class BindVerb:
    def __init__(self, ctx: VerbContext) -> None:
        self._ctx = ctx

    def bind(self, pod: Pod, node: str) -> str:
        """Bind the cluster's copy of an unbound, pending pod of ours; returns the error."""
        ctx = self._ctx
        try:
            plan = plan_pod(pod, ctx.scheduling)
        except DomainError as exc:
            return self._failed(pod, node, f"pod {pod.key} cannot be scheduled: {exc}")
        if plan is None:
            return self._bind_plain(pod, node)
        if ctx.config.combine_scores:
            chosen = self._reserve_on(pod, plan, node)
            if isinstance(chosen, str):
                return self._failed(pod, node, chosen)
            annotations, labels = chosen
        else:
            refused = self._check_reserved(pod, node)
            if refused:
                return refused
            annotations, labels = {}, {}
        return self._bind_reserved(pod, node, annotations, labels)

    def _check_reserved(self, pod: Pod, node: str) -> str:
        """Single-node mode: '' when the pod's reservation on `node` may be bound (it is marked
        as binding then), else the bind's error."""
        ctx, state = self._ctx, self._ctx.state
        with state.locked():
            allocation = state.ledger.allocation(pod.key)
            reservation = state.reservation(pod.key)
            misfit = state.ledger.misfit(pod.key)
            claim = written_claim(pod, {}, ctx.vendor)
            carried = reservation is None or (
                claim is not None and grant_identity(claim) == reservation.signature
            )
            if allocation is not None and allocation.node == node and carried and not misfit:
                state.start_binding(pod.key)
                return ""
        if allocation is None or allocation.node != node:
            held = (
                "it holds none: filter did not place it, or the reservation expired"
                if allocation is None
                else f"its cards are reserved on {allocation.node}"
            )
            message = f"pod {pod.key} has no GPU reservation on {node} ({held})"
            return self._failed(pod, node, f"{message}; it will be scheduled again")
        if not carried:
            message = f"pod {pod.key}'s annotations do not carry the grant reserved for it"
            return self._failed(pod, node, f"{message}; it will be scheduled again")
        message = (
            f"pod {pod.key}'s GPU reservation on {node} no longer fits beside the other pods' "
            f"grants ({misfit})"
        )
        return self._refuse_reserved(pod, node, message)

    def _reserve_on(self, pod: Pod, plan: PodPlan, node: str) -> tuple[Notes, Notes] | str:
        ctx, state = self._ctx, self._ctx.state
        now = ctx.clock()
        with state.locked():
            state.release(plan.key, revoke=True)
            views, broken = state.views([node])
            decision = decide(plan, views, state.budget(plan.namespace))
            if isinstance(decision, NoPlacement):
                rejection = broken.get(node) or decision.rejections.get(node)
                why = rejection.line if rejection else "unknown node"
                return f"pod {plan.key} no longer fits on {node}: {why}"
            annotations, labels = grant_annotations(
                pod, node, decision.grants, now, ctx.vendor, ctx.trust
            )
            try:
                state.hold(
                    plan.key,
                    plan.namespace,
                    node,
                    decision.grants,
                    plan.init_count,
                    strict=True,
                    host=plan.host,
                )
            except DomainError as exc:
                return f"internal error: {exc}"
            identity = written_identity(pod, annotations, ctx.vendor)
            state.reserve(plan.key, node, now, identity, own=True, written=annotations)
            state.start_binding(plan.key)
        return annotations, labels

    def _bind_reserved(self, pod: Pod, node: str, annotations: Notes, labels: Notes) -> str:
        ctx = self._ctx
        expiry = timedelta(seconds=ctx.config.lock_expiry)
        claim = written_claim(pod, annotations, ctx.vendor)
        if claim is None:  # cannot happen: the reservation was checked against the pod's grant
            return self._give_up(pod, node, f"pod {pod.key} carries no grant to bind")
        record = ctx.recorder.for_bind(pod, node, claim)
        try:
            ctx.fence.check(f"lock on node {node}")
            ctx.cluster.lock_node(node, pod.namespace, pod.name, expiry, also=record)
        except ClusterError as exc:
            return self._give_up(pod, node, f"binding {pod.key} to {node} failed: {exc}")
        record.done()
        marks = {
            **annotations,
            BIND_PHASE_ANNOTATION: "allocating",
            BIND_TIME_ANNOTATION: str(int(ctx.clock())),
        }
        written = ctx.writer.patch(pod, marks, labels or None)
        if written.outcome is Outcome.REFUSED:
            return self._give_up(pod, node, f"marking pod {pod.key} failed: {written.detail}")
        if written.outcome is Outcome.UNKNOWN:
            return self._unknown(pod, node, written.detail)
        ctx.state.written(pod.key)
        outcome, detail = self._create_binding(pod, node)
        if outcome is Outcome.REFUSED:
            return self._give_up(pod, node, f"binding {pod.key} to {node} failed: {detail}")
        if outcome is Outcome.UNKNOWN:
            return self._unknown(pod, node, detail)
        ctx.state.bound(pod.key)
        log.info("pod %s bound to %s", pod.key, node)
        ctx.event(pod, BINDING_SUCCEED, f"bound to {node}")
        return ""

    def _bind_plain(self, pod: Pod, node: str) -> str:
        outcome, detail = self._create_binding(pod, node)
        if outcome is not Outcome.WRITTEN:
            return self._failed(pod, node, f"binding {pod.key} to {node} failed: {detail}")
        self._ctx.event(pod, BINDING_SUCCEED, f"bound to {node}")
        return ""

    def _create_binding(self, pod: Pod, node: str) -> tuple[Outcome, str]:
        """POST the Binding; an ambiguous failure is settled by reading the pod live."""
        ctx = self._ctx
        try:
            ctx.fence.check(f"binding of pod {pod.key}")
            ctx.cluster.bind(pod.namespace, pod.name, pod.uid, node)
            return Outcome.WRITTEN, ""
        except Rejected as exc:
            return Outcome.REFUSED, str(exc)
        except ClusterError as exc:
            current = ctx.writer.read(pod)
            if not isinstance(current, Pod) and current is not None:
                return Outcome.UNKNOWN, f"{exc}; {current.detail}"
            if current is not None and current.uid == pod.uid and current.node_name == node:
                log.info(
                    "pod %s: the Binding failed (%s) but it is bound to %s", pod.key, exc, node
                )
                return Outcome.WRITTEN, ""
            return Outcome.REFUSED, str(exc)

    def _give_up(self, pod: Pod, node: str, message: str) -> str:
        """A clear failure: free the node lock, the cards and the grant on the pod."""
        ctx = self._ctx
        try:
            ctx.fence.check(f"unlock of node {node}")
            ctx.cluster.release_node_lock(node, pod.namespace, pod.name)
        except ClusterError as exc:
            log.warning("node %s: lock not released: %s", node, exc)
        return self._refuse_reserved(pod, node, message)

    def _refuse_reserved(self, pod: Pod, node: str, message: str) -> str:
        """Free the cards reserved for the pod and take its grant off it, durably."""
        ctx = self._ctx
        reservation = ctx.state.reservation(pod.key)
        ctx.state.release(pod.key, revoke=True)
        if reservation is not None:
            ctx.revoker.revoke(pod.namespace, pod.name, reservation.signature)
        return self._failed(pod, node, f"{message}; GPU reservation released")

    def _unknown(self, pod: Pod, node: str, detail: str) -> str:
        """The outcome is unknown: keep the cards until the pod's events or the sweeper say."""
        self._ctx.state.stop_binding(pod.key)
        return self._failed(
            pod,
            node,
            f"binding {pod.key} to {node}: outcome unknown ({detail}); "
            "its GPU reservation is kept until the cluster shows what happened",
        )

    def _failed(self, pod: Pod, node: str, message: str) -> str:
        log.warning("%s", message)
        self._ctx.event(pod, BINDING_FAILED, message, warning=True)
        return message
