"""Keep the scheduler's state in step with the cluster: nodes, pods and ResourceQuotas.

Every event is applied on its own and never raises: a malformed node annotation makes that node
unusable (with the reason kept for filter replies), a malformed pod annotation makes that pod
ignored, a malformed quota is skipped; each with a log line.

Which pods count (trust.py, the domain's counting rule): a bound, unfinished pod counts what
bound_pods.py says (its node's occupancy record, else the grant first counted, else a believed
grant or one it holds GPUs with), and keeps counting it whatever its annotations say later. An
unbound pod counts only a believed grant, as a reservation, and only if it fits: a grant that
would over-fill a card is not counted and the leader revokes it (late_grants.py). An unbound
pod whose grant stops being believed (annotations edited or cleared) gives its cards back,
unless it holds a reservation this process made and has not written yet. The leader and a
standby run this same code on the same events and read the same records, so their ledgers
agree.
"""

import logging
import threading
from collections.abc import Callable

from vgpu.app.scheduler.bound_pods import BoundPods
from vgpu.app.scheduler.late_grants import LateGrants
from vgpu.app.scheduler.occupancy import OccupancyBook
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
from vgpu.domain.host import NOTHING, HostResources, node_allocatable, pod_host_request
from vgpu.domain.hostile_text import INT64, whole_number
from vgpu.domain.initrelease import hold_after_init
from vgpu.domain.trust import OCCUPANCY_ANNOTATION, GrantVerdict
from vgpu.domain.vendor import ASSIGNED_TIME_ANNOTATION
from vgpu.ports.cluster import Action, ClusterEvent, ClusterPort, Kind, Quota

log = logging.getLogger(__name__)

_UNDATED = 1 << 62  # a grant without a readable time counts as the newest, as `_since` does


class ClusterFollower:
    """Applies cluster events to a SchedulerState and an OccupancyBook.

    `late_grants` takes the unbound grants not counted because they would over-fill a card
    (none: they are only logged)."""

    def __init__(
        self,
        state: SchedulerState,
        vendor: Vendor,
        memory_factor: int,
        clock: Callable[[], float],
        trust: GrantTrust,
        book: OccupancyBook | None = None,
        late_grants: LateGrants | None = None,
    ) -> None:
        self._state = state
        self._vendor = vendor
        self._memory_factor = memory_factor
        self._clock = clock
        self._trust = trust
        self._book = book if book is not None else OccupancyBook(state)
        self._bound = BoundPods(state, self._book, vendor)
        self._late_grants = late_grants
        self._quotas: dict[tuple[str, str], QuotaLimits] = {}
        self._ignored: dict[str, str] = {}  # pod -> why its grant is not counted (logged once)
        self._unreadable_hosts: dict[str, str] = {}  # node -> why its allocatable is not read
        self._unreadable_requests: dict[str, str] = {}  # pod -> why its requests are not read
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
            for node in nodes:  # first: their occupancy records say what bound pods count
                self._apply(ClusterEvent(Kind.NODE, Action.ADDED, node))
            for quota in quotas:
                self._apply(ClusterEvent(Kind.QUOTA, Action.ADDED, quota))
            for pod in sorted(pods, key=_rebuild_order):
                self._apply(ClusterEvent(Kind.POD, Action.ADDED, pod))
            self._book.end_all_but({pod.uid for pod in pods if not pod.is_finished})
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
        if action is Action.DELETED:
            self._book.drop_node(node.name)
            self._unreadable_hosts.pop(node.name, None)
        else:
            text = node.annotations.get(OCCUPANCY_ANNOTATION)
            record = self._book.read_record(node.name, text)
            if record is not None:
                self._bound.record_changed(node.name, record)
        allocatable = None if action is Action.DELETED else self._allocatable(node)
        with state.locked():
            state.ledger.set_host(node.name, allocatable)
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

    def _allocatable(self, node: ClusterNode) -> HostResources | None:
        """The node's allocatable CPU and memory; None (FGD then counts its CPU as enough for
        every shape) when it gives none or they do not read (logged once per value)."""
        try:
            allocatable = node_allocatable(node.allocatable)
        except DomainError as exc:
            problem = f"node {node.name}: {exc}; FGD counts its CPU as enough for every pod"
            _warn_once(self._unreadable_hosts, node.name, problem)
            return None
        self._unreadable_hosts.pop(node.name, None)
        return allocatable

    # pods ------------------------------------------------------------------------------------
    def _pod(self, action: Action, pod: Pod) -> None:
        state = self._state
        if action is Action.DELETED:
            state.forget(pod.key)
            self._ignored.pop(pod.key, None)
            self._unreadable_requests.pop(pod.key, None)
            self._bound.ended(pod)
            if self._late_grants is not None:
                self._late_grants.forget(pod.key)
            return
        if pod.is_finished:
            self._bound.ended(pod)
            with state.locked():
                state.ledger.release_host(pod.key)
                released = state.release(pod.key)
            if released:
                log.info("pod %s %s: its GPU slices are free again", pod.key, pod.phase)
            return
        if pod.node_name:
            with state.locked():
                state.ledger.charge_host(pod.key, pod.node_name, self._host(pod), bound=True)
        if not pod.node_name and state.holds_as_written(pod.key, pod.annotations):
            self._ignored.pop(pod.key, None)  # the echo of this replica's own write
            return
        judged = self._trust.occupancy(pod)
        if not pod.node_name:
            self._unbound(pod, judged.verdict)
        elif self._bound.count(pod, judged):
            self._ignored.pop(pod.key, None)
        else:
            self._ignore(pod, judged.why_not)

    def _unbound(self, pod: Pod, verdict: GrantVerdict) -> None:
        """A believed grant reserves its cards if they have room; else it is a late grant."""
        if verdict.claim is None or verdict.grants is None or verdict.problem:
            self._ignore(pod, verdict.problem)
            return
        self._ignored.pop(pod.key, None)
        claim, grants = verdict.claim, verdict.grants
        identity = grant_identity(claim)
        state = self._state
        if state.is_revoked(pod.key, identity):
            return
        after_init = hold_after_init(grants, pod.init_progress)
        with state.locked():
            late = state.ledger.overfill(pod.key, claim.node, grants, pod.init_count, after_init)
            if late:
                reservation = state.reservation(pod.key)
                if reservation is None or not reservation.own:  # superseded by the late grant
                    state.release(pod.key)
                state.revoke(pod.key, identity)
            else:
                problems = state.hold(
                    pod.key,
                    pod.namespace,
                    claim.node,
                    grants,
                    pod.init_count,
                    strict=False,
                    footprint=after_init,
                    host=self._host(pod),
                )
                current = state.reservation(pod.key)
                if current is None or current.signature != identity:
                    state.reserve(pod.key, claim.node, self._since(claim.assigned_time), identity)
        if late:
            log.warning(
                "pod %s: its grant on %s (%s %s) is not counted: %s; the grant counted before "
                "keeps the card, and the leader takes this one off the pod",
                pod.key,
                claim.node,
                ASSIGNED_TIME_ANNOTATION,
                claim.assigned_time,
                late,
            )
            if self._late_grants is not None:
                self._late_grants.found(pod, claim.node, identity, late)
            return
        for problem in problems:
            log.warning("%s", problem)

    def _host(self, pod: Pod) -> HostResources:
        """The pod's CPU and memory request; nothing (logged once) when it does not read, which
        the API server never lets happen."""
        try:
            return pod_host_request(pod)
        except DomainError as exc:
            problem = f"pod {pod.key}: its CPU and memory are not counted: {exc}"
            _warn_once(self._unreadable_requests, pod.key, problem)
            return NOTHING

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
        seconds = _seconds(assigned)
        return self._clock() if seconds is None else float(seconds)

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


def _warn_once(logged: dict[str, str], key: str, problem: str) -> None:
    """Log `problem` about `key` unless it is the one logged last for it."""
    if logged.get(key) != problem:
        logged[key] = problem
        log.warning("%s", problem)


def _seconds(assigned: str) -> int | None:
    """`hami.io/vgpu-time` as whole seconds, None when it is not a number."""
    try:
        return whole_number(assigned, 0, INT64[1])
    except ValueError:
        return None


def _rebuild_order(pod: Pod) -> tuple[bool, int, str]:
    """Bound pods first (they always count), then unbound grants oldest first: of two that
    cannot share a card, the earlier keeps it, as it did while the events came one by one."""
    assigned = _seconds(pod.annotations.get(ASSIGNED_TIME_ANNOTATION, ""))
    return (not pod.node_name, assigned if assigned is not None else _UNDATED, pod.key)
