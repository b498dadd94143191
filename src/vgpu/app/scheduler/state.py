"""What the scheduler knows, under one lock: the usage ledger, quota, reservations, node faults.

A *reservation* is a grant the scheduler made (or found on a pod's annotations) for a pod that
is not bound to its node yet. It expires after the configured timeout so that a pod that is
never bound cannot hold cards forever. Once expired or given up, a reservation is remembered
as *revoked* by its grant identity, so that late events carrying the same annotations do not
bring it back until the revocation has cleared them in the API (see revocation.py); a pod that
really got bound with those annotations is counted again.
"""

import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace

from vgpu.domain import (
    Budget,
    Decision,
    Ledger,
    NodeRejection,
    NodeView,
    PodGrants,
    PodPlan,
    QuotaBook,
    QuotaLimits,
    Reason,
    Usage,
)
from vgpu.domain.fragmentation.card_balanced import CardCounts
from vgpu.domain.host import HostResources
from vgpu.domain.quota import pod_charge


@dataclass(frozen=True, slots=True)
class Reservation:
    """An unbound pod's hold on cards: since when, under which annotation signature."""

    pod: str
    node: str
    since: float
    signature: str  # trust.grant_identity of the grant
    binding: bool = False  # a bind is in flight; the sweeper leaves it alone
    own: bool = False  # made by this process (not read from annotations): it outranks events
    # the annotations this process wrote with the grant (None: a removed key); () when the
    # reservation was read from the pod's annotations
    written: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A consistent copy of the state for metrics."""

    views: tuple[NodeView, ...]
    pods: tuple[tuple[str, str, dict[str, Usage]], ...]  # pod key, node, footprint
    quotas: tuple[tuple[str, QuotaLimits, Usage], ...]  # namespace, limits, used


class SchedulerState:
    """The ledger, the quota book, reservations and per-node problems, guarded together.

    Callers that must decide and record atomically hold `locked()` around both steps; every
    method also takes the (re-entrant) lock itself.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.ledger = Ledger()
        self.quota = QuotaBook()
        self._problems: dict[str, str] = {}
        self._unreported: dict[str, str] = {}  # node -> why the handshake dropped its cards
        self._closed: dict[str, str] = {}  # node -> why it takes no new grants (its cards stay)
        self._reservations: dict[str, Reservation] = {}
        self._revoked: dict[str, set[str]] = {}
        self._limited: set[str] = set()
        self._synced = threading.Event()  # read by /readyz on the event loop: no lock

    @contextmanager
    def locked(self) -> Iterator[None]:
        with self._lock:
            yield

    @contextmanager
    def locked_if_free(self) -> Iterator[bool]:
        """Holds the lock (True) unless another thread holds it (False, nothing held): for the
        event loop, which answers health checks and so must never wait for the lock."""
        free = self._lock.acquire(blocking=False)
        try:
            yield free
        finally:
            if free:
                self._lock.release()

    # readiness -------------------------------------------------------------------------------
    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def mark_synced(self) -> None:
        self._synced.set()

    # nodes -----------------------------------------------------------------------------------
    def node_problem(self, node: str) -> str | None:
        with self._lock:
            return self._problems.get(node)

    def set_node_problem(self, node: str, problem: str) -> None:
        with self._lock:
            self._problems[node] = problem
            self.ledger.remove_node(node)

    def clear_node_problem(self, node: str) -> None:
        with self._lock:
            self._problems.pop(node, None)

    def unreported(self, node: str) -> str | None:
        """Why the node handshake dropped the node's cards, or None while it reports."""
        with self._lock:
            return self._unreported.get(node)

    def drop_unreported(self, node: str, problem: str) -> None:
        """The node's device plugin stopped reporting: its cards leave the ledger (its pods'
        usage stays) and filter replies name `problem` until `restore_reported`."""
        with self._lock:
            self._unreported[node] = problem
            self.ledger.remove_node(node)

    def restore_reported(self, node: str) -> bool:
        """The node reports again; True when it had been dropped (re-read its cards then)."""
        with self._lock:
            return self._unreported.pop(node, None) is not None

    def close_node(self, node: str, problem: str | None) -> None:
        """With a `problem`, the node takes no new grants (filter replies name it) while what
        it holds stays counted; None opens it again."""
        with self._lock:
            if problem is None:
                self._closed.pop(node, None)
            else:
                self._closed[node] = problem

    def views(
        self, names: Iterable[str], exclude_pod: str | None = None
    ) -> tuple[list[NodeView], dict[str, NodeRejection]]:
        """Candidate nodes as `decide` wants them, and rejections for nodes known to be broken.

        The views share the ledger's usage (no copies): decide on them while holding
        `locked()`. `exclude_pod` leaves that pod's own grant out of the usage (re-scoring a
        pod that already holds a reservation must not count it against itself).
        """
        with self._lock:
            candidates, broken = self._candidates(names)
            return [self.ledger.view(name, exclude_pod) for name in candidates], broken

    def card_counts(self) -> CardCounts:
        """The cluster's cards per kind (what FGD-balanced's claims weigh)."""
        with self._lock:
            return self.ledger.card_counts()

    def snapshot_views(
        self, names: Iterable[str], exclude_pod: str | None = None
    ) -> tuple[list[NodeView], dict[str, NodeRejection]]:
        """Like `views`, but each usage is a copy: safe to read after the lock is released."""
        with self._lock:
            views, broken = self.views(names, exclude_pod)
            return [replace(v, usage=dict(v.usage)) for v in views], broken

    def decide(
        self, plan: PodPlan, names: Iterable[str]
    ) -> tuple[Decision, dict[str, NodeRejection]]:
        """The pod's placement among `names` through the ledger's index (the best node only),
        and rejections for nodes known to be broken. Hold `locked()` to record it atomically."""
        with self._lock:
            candidates, broken = self._candidates(names)
            return self.ledger.decide(plan, candidates, self.budget(plan.namespace)), broken

    def feasible(
        self, plan: PodPlan, names: Iterable[str]
    ) -> tuple[Decision, dict[str, NodeRejection]]:
        """Every candidate's fit or rejection for combined-scores mode, as `decide` over
        `views(names, exclude_pod=plan.key)` with the pod's own quota charge given back, and
        rejections for nodes known to be broken."""
        with self._lock:
            candidates, broken = self._candidates(names)
            budget = self.budget(plan.namespace, plan.key, plan.init_count)
            return self.ledger.feasible(plan, candidates, budget, exclude_pod=plan.key), broken

    def _candidates(
        self, names: Iterable[str]
    ) -> tuple[dict[str, None], dict[str, NodeRejection]]:
        """The names once each, in their order (as a dict: the ledger's index takes it as it
        is), less the broken nodes, with their rejections."""
        if not self._problems and not self._unreported and not self._closed:  # the usual case
            return dict.fromkeys(names), {}
        candidates: dict[str, None] = {}
        broken: dict[str, NodeRejection] = {}
        for name in dict.fromkeys(names):
            problem = self._problems.get(name) or self._unreported.get(name)
            closed = self._closed.get(name)
            if problem is not None:
                broken[name] = NodeRejection(name, Reason.NODE_UNREGISTERED, problem)
            elif closed is not None:
                broken[name] = NodeRejection(name, Reason.UNRECORDED, closed)
            else:
                candidates[name] = None
        return candidates, broken

    def usage_view(self, name: str) -> NodeView:
        with self._lock:
            view = self.ledger.view(name)
            return replace(view, usage=dict(view.usage))

    def set_quota(self, namespace: str, limits: QuotaLimits) -> None:
        """Replace a namespace's limits (unlimited clears them)."""
        with self._lock:
            self.quota.set_limits(namespace, limits)
            if limits.is_unlimited:
                self._limited.discard(namespace)
            else:
                self._limited.add(namespace)

    def budget(self, namespace: str, exclude_pod: str | None = None, init_count: int = 0) -> Budget:
        """What the namespace may still take; `exclude_pod` hands that pod's own charge back."""
        with self._lock:
            budget = self.quota.budget(namespace)
            own = self.ledger.allocation(exclude_pod) if exclude_pod else None
            if own is None or budget.blocked:
                return budget
            charge = pod_charge(own.grants, init_count)

            def back(left: int | None, amount: int) -> int | None:
                return None if left is None else left + amount

            return Budget(
                memory=back(budget.memory, charge.memory),
                cores=back(budget.cores, charge.cores),
                cards=back(budget.cards, charge.slices),
            )

    # pods ------------------------------------------------------------------------------------
    def hold(
        self,
        pod: str,
        namespace: str,
        node: str,
        grants: PodGrants,
        init_count: int,
        *,
        strict: bool,
        footprint: Mapping[str, Usage] | None = None,
        host: HostResources | None = None,
    ) -> list[str]:
        """Count a pod's grants in the ledger and its namespace's quota; returns problems.

        With `strict`, LedgerError is raised (and nothing changes) if a card would overflow.
        `footprint` overrides the pod's hold on its cards (see `Ledger.grant`), and the
        namespace is charged that hold instead of its grants' peak. `host`: the CPU and memory
        an unbound pod's reservation holds on the node too, until it is bound or released.
        """
        with self._lock:
            problems = self.ledger.grant(
                pod, node, grants, init_count, strict=strict, footprint=footprint
            )
            self.quota.charge(pod, namespace, grants, init_count, hold=footprint)
            if host is not None:
                self.ledger.charge_host(pod, node, host)
            return problems

    def reserve(
        self,
        pod: str,
        node: str,
        since: float,
        signature: str,
        *,
        own: bool = False,
        written: Mapping[str, str | None] | None = None,
    ) -> None:
        """Remember the pod's hold as unbound; `written`: the annotations this process writes
        with the grant, so that their echo is known for what it is (`holds_as_written`)."""
        written_items = tuple(written.items()) if written else ()
        with self._lock:
            self._reservations[pod] = Reservation(
                pod, node, since, signature, own=own, written=written_items
            )

    def holds_as_written(self, pod: str, annotations: Mapping[str, str]) -> bool:
        """Whether the pod's annotations carry, byte for byte, the grant this process wrote
        and still reserves: its own patch coming back as an event, which judging and holding
        again would not change."""
        with self._lock:
            current = self._reservations.get(pod)
            return (
                current is not None
                and bool(current.written)
                and all(annotations.get(key) == value for key, value in current.written)
                and self.ledger.allocation(pod) is not None
            )

    def reservation(self, pod: str) -> Reservation | None:
        with self._lock:
            return self._reservations.get(pod)

    def start_binding(self, pod: str) -> None:
        with self._lock:
            current = self._reservations.get(pod)
            if current is not None:
                self._reservations[pod] = replace(current, binding=True)

    def written(self, pod: str) -> None:
        """The reservation's grant is on the pod now: from here on the pod's events rule it."""
        with self._lock:
            current = self._reservations.get(pod)
            if current is not None:
                self._reservations[pod] = replace(current, own=False)

    def stop_binding(self, pod: str) -> None:
        """A bind ended without a known outcome: the sweeper may expire the reservation again."""
        with self._lock:
            current = self._reservations.get(pod)
            if current is not None:
                self._reservations[pod] = replace(current, binding=False)

    def bound(self, pod: str) -> None:
        """The pod is on its node now: its grant stays, the reservation clock stops."""
        with self._lock:
            self._reservations.pop(pod, None)
            self._revoked.pop(pod, None)

    def release(self, pod: str, *, revoke: bool = False) -> bool:
        """Give back a pod's cards and quota; with `revoke`, ignore its current annotations
        from now on (until it is bound or scheduled again). False if it held nothing."""
        with self._lock:
            held = self.ledger.release(pod)
            self.ledger.release_host(pod, unbound_only=True)
            self.quota.refund(pod)
            reservation = self._reservations.pop(pod, None)
            if revoke and reservation is not None:
                self._revoked.setdefault(pod, set()).add(reservation.signature)
            return held

    def revoke(self, pod: str, signature: str) -> None:
        """Ignore the grant `signature` on the pod's annotations from now on (until it is bound
        or gone), as for a released reservation."""
        with self._lock:
            self._revoked.setdefault(pod, set()).add(signature)

    def forget(self, pod: str) -> None:
        """The pod is gone for good."""
        with self._lock:
            self.release(pod)
            self.ledger.release_host(pod)
            self._revoked.pop(pod, None)

    def is_revoked(self, pod: str, signature: str) -> bool:
        with self._lock:
            return signature in self._revoked.get(pod, ())

    def expire(self, now: float, timeout: float) -> list[Reservation]:
        """Release reservations older than `timeout` whose pod is not being bound."""
        with self._lock:
            stale = [
                r for r in self._reservations.values() if not r.binding and now - r.since > timeout
            ]
            for reservation in stale:
                self.release(reservation.pod, revoke=True)
            return stale

    # reading ---------------------------------------------------------------------------------
    def reservations(self) -> list[Reservation]:
        with self._lock:
            return sorted(self._reservations.values(), key=lambda r: r.pod)

    def snapshot(self) -> Snapshot:
        with self._lock:
            views = tuple(self.usage_view(name) for name in self.ledger.nodes())
            pods = tuple(
                (a.pod, a.node, dict(a.footprint))
                for a in sorted(self.ledger.pods(), key=lambda a: a.pod)
            )
            quotas = tuple(
                (ns, self.quota.limits(ns), self.quota.used(ns)) for ns in self._namespaces()
            )
            return Snapshot(views, pods, quotas)

    def _namespaces(self) -> list[str]:
        return sorted(ns for ns in self._limited if not self.quota.limits(ns).is_unlimited)
