"""Keep the scheduler's state in step with the cluster: nodes, pods and ResourceQuotas.

Every event is applied on its own and never raises: a malformed node annotation makes that node
unusable (with the reason kept for filter replies), a malformed pod annotation makes that pod
ignored, a malformed quota is skipped; each with a log line.

A pod's grant counts only when `GrantTrust` vouches for it (trust.py). A pod whose grant stops
being vouched for (annotations edited, cleared, or bound elsewhere) gives its cards back, unless
it is unbound and holds a reservation this process made and has not written yet. The leader
and a standby run this same code on the same events, so their ledgers agree.
"""

import logging
import threading
from collections.abc import Callable

from vgpu.app.scheduler.state import SchedulerState
from vgpu.app.scheduler.trust import GrantTrust, grant_identity
from vgpu.domain import (
    ClusterNode,
    DomainError,
    Pod,
    QuotaLimits,
    Vendor,
    limits_from_hard,
)
from vgpu.domain.hostile_text import INT64, whole_number
from vgpu.domain.initrelease import hold_after_init
from vgpu.ports.cluster import Action, ClusterEvent, ClusterPort, Kind, Quota

log = logging.getLogger(__name__)


class ClusterFollower:
    """Applies cluster events to a SchedulerState."""

    def __init__(
        self,
        state: SchedulerState,
        vendor: Vendor,
        memory_factor: int,
        clock: Callable[[], float],
        trust: GrantTrust,
    ) -> None:
        self._state = state
        self._vendor = vendor
        self._memory_factor = memory_factor
        self._clock = clock
        self._trust = trust
        self._quotas: dict[tuple[str, str], QuotaLimits] = {}
        self._ignored: dict[str, str] = {}  # pod -> why its grant is not counted (logged once)
        # one event or one rebuild at a time: a rebuild's listed copy of a pod can never be
        # applied after a newer event for it
        self._serial = threading.RLock()

    def handle(self, event: ClusterEvent) -> None:
        """Apply one event; problems are logged, never raised."""
        with self._serial:
            self._apply(event)

    def _apply(self, event: ClusterEvent) -> None:
        try:
            if event.kind is Kind.NODE and isinstance(event.obj, ClusterNode):
                self._node(event.action, event.obj)
            elif event.kind is Kind.POD and isinstance(event.obj, Pod):
                self._pod(event.action, event.obj)
            elif event.kind is Kind.QUOTA and isinstance(event.obj, Quota):
                self._quota(event.action, event.obj)
        except Exception:  # a bug here must not kill the adapter's watch thread
            log.exception("could not apply %s %s event", event.kind, event.action)

    def rebuild(self, cluster: ClusterPort) -> None:
        """Read every node, quota and pod (after a start, a restart or a key rotation) into the
        state; events wait meanwhile."""
        with self._serial:
            nodes, quotas, pods = cluster.list_nodes(), cluster.list_quotas(), cluster.list_pods()
            for node in nodes:
                self._apply(ClusterEvent(Kind.NODE, Action.ADDED, node))
            for quota in quotas:
                self._apply(ClusterEvent(Kind.QUOTA, Action.ADDED, quota))
            for pod in pods:
                self._apply(ClusterEvent(Kind.POD, Action.ADDED, pod))
        log.info(
            "state rebuilt from the cluster: %d nodes, %d quotas, %d pods, %d holding GPUs",
            len(nodes),
            len(quotas),
            len(pods),
            len(self._state.ledger.pods()),
        )

    def reload_node(self, cluster: ClusterPort, name: str) -> None:
        """Read one node again into the state (the handshake bringing back a node it dropped);
        events wait meanwhile, so an older copy never overwrites a newer event's."""
        with self._serial:
            node = cluster.get_node(name)
            if node is not None:
                self._apply(ClusterEvent(Kind.NODE, Action.MODIFIED, node))

    # nodes -----------------------------------------------------------------------------------
    def _node(self, action: Action, node: ClusterNode) -> None:
        state = self._state
        if action is Action.DELETED or self._vendor.register_annotation not in node.annotations:
            with state.locked():
                state.clear_node_problem(node.name)
                if action is Action.DELETED:
                    state.restore_reported(node.name)
                state.ledger.remove_node(node.name)
            return
        try:
            devices = node.devices(self._vendor)
            cordoned = node.cordoned(self._vendor)
            scores = node.pair_scores()
        except DomainError as exc:
            problem = f"node {node.name} is not usable: {exc}"
            if state.node_problem(node.name) != problem:
                log.warning("%s; fix the annotation to use its GPUs again", problem)
            state.set_node_problem(node.name, problem)
            return
        with state.locked():
            if state.node_problem(node.name) is not None:
                log.info("node %s: register annotation readable again", node.name)
            state.clear_node_problem(node.name)
            if state.unreported(node.name) is None:  # else the handshake brings it back
                state.ledger.set_node(node.name, devices, cordoned, scores)

    # pods ------------------------------------------------------------------------------------
    def _pod(self, action: Action, pod: Pod) -> None:
        state = self._state
        if action is Action.DELETED:
            state.forget(pod.key)
            self._ignored.pop(pod.key, None)
            return
        if pod.is_finished:
            if state.release(pod.key):
                log.info("pod %s %s: its GPU slices are free again", pod.key, pod.phase)
            return
        verdict = self._trust.judge(pod)
        if verdict.claim is None or verdict.grants is None or verdict.problem:
            self._ignore(pod, verdict.problem)
            return
        self._ignored.pop(pod.key, None)
        claim, grants = verdict.claim, verdict.grants
        signature = grant_identity(claim)
        if not pod.node_name and state.is_revoked(pod.key, signature):
            return
        after_init = hold_after_init(grants, pod.init_progress)
        with state.locked():
            before = state.ledger.allocation(pod.key)
            problems = state.hold(
                pod.key,
                pod.namespace,
                claim.node,
                grants,
                pod.init_count,
                strict=False,
                footprint=after_init,
            )
            if after_init is not None and before is not None and before.footprint != after_init:
                log.info("pod %s: init containers done, it now holds %s", pod.key, after_init)
            if pod.node_name:
                state.bound(pod.key)
            else:
                current = state.reservation(pod.key)
                if current is None or current.signature != signature:
                    state.reserve(pod.key, claim.node, self._since(claim.assigned_time), signature)
        for problem in problems:
            log.warning("%s", problem)

    def _ignore(self, pod: Pod, problem: str) -> None:
        """The pod's annotations grant nothing we count: give back what it held."""
        if problem and self._ignored.get(pod.key) != problem:
            log.warning("pod %s: its GPU grant is not counted: %s", pod.key, problem)
        if problem:
            self._ignored[pod.key] = problem
        else:
            self._ignored.pop(pod.key, None)
        state = self._state
        with state.locked():
            reservation = state.reservation(pod.key)
            if reservation is not None and reservation.own and not pod.node_name:
                return  # our own decision, not written yet (or being revoked): we know better
            if state.release(pod.key):
                log.info("pod %s: its grant is gone; its GPU slices are free again", pod.key)

    def _since(self, assigned: str) -> float:
        """When the grant was written (`hami.io/vgpu-time`, unix seconds), else now."""
        try:
            return float(whole_number(assigned, 0, INT64[1]))
        except ValueError:
            return self._clock()

    # quotas ----------------------------------------------------------------------------------
    def _quota(self, action: Action, quota: Quota) -> None:
        with self._state.locked():
            self._quota_locked(action, quota)

    def _quota_locked(self, action: Action, quota: Quota) -> None:
        key = (quota.namespace, quota.name)
        if action is Action.DELETED:
            self._quotas.pop(key, None)
        else:
            try:
                limits = limits_from_hard(quota.hard, self._vendor, self._memory_factor)
            except DomainError as exc:
                log.warning("ResourceQuota %s/%s ignored: %s", quota.namespace, quota.name, exc)
                self._quotas.pop(key, None)
            else:
                self._quotas[key] = limits
        self._state.set_quota(quota.namespace, self._combined(quota.namespace))

    def _combined(self, namespace: str) -> QuotaLimits:
        """Several quotas in one namespace: the tightest limit of each kind applies."""
        found = [limits for (ns, _), limits in self._quotas.items() if ns == namespace]

        def tightest(values: list[int | None]) -> int | None:
            given = [v for v in values if v is not None]
            return min(given) if given else None

        return QuotaLimits(
            memory=tightest([q.memory for q in found]),
            cores=tightest([q.cores for q in found]),
            cards=tightest([q.cards for q in found]),
        )
