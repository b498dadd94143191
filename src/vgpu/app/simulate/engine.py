"""The discrete-event engine: pods arrive, pass admission, are scheduled, run and finish.

Scheduling makes the same domain calls as the scheduler service: `plan_pod`, the ledger's
indexed `Ledger.decide` (the same answers as `decide` on every node's view) within the
namespace's quota budget, then `Ledger.grant` and
`QuotaBook.charge` with the grants read back from their annotation; a finished pod is
released and refunded. Pods that fit nowhere wait in a Pending queue (first come, first
served) that is retried whenever capacity frees.

With the scenario's `preemption` on, a pod that fits nowhere when it arrives asks
`choose_victims` on every node for the cheapest set of lower-priority running pods whose release
lets it fit, as the scheduler's /preempt does; the cheapest node's victims are evicted (they go
back to the Pending queue, as their controller recreates them, and run from the start when
placed again) and the pod is placed there.
"""

import heapq
import logging
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from vgpu.domain import (
    NVIDIA,
    Budget,
    Ledger,
    NodeRejection,
    NoPlacement,
    Placement,
    PodPlan,
    PodPolicies,
    Policy,
    QuotaBook,
    Reason,
    SchedulingConfig,
    encode_pod_grants,
    limits_from_hard,
)
from vgpu.domain.fragmentation.cards import CardShape, RecentShapes
from vgpu.domain.mig.grants import decode_granted, mig_reservations
from vgpu.domain.preemption import Cost, Victim, choose_victims, cost
from vgpu.domain.quota import pod_charge
from vgpu.domain.reasons import phrase

from .admission import Admissions
from .dra import DraMode, DraPlacer
from .infeasible import InfeasibleCache, Shape, involves_quota, shape_of
from .metrics import Preemptions, Reasons, RunResult, Sampler, TypicalRequest, mean, percentile
from .progress import Progress
from .scenario import Quota, Scenario
from .workload import PodArrival, cluster_nodes

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PolicyPair:
    """A node policy and a GPU policy, written `node/gpu` (e.g. `binpack/spread`)."""

    node: Policy
    gpu: Policy

    @property
    def label(self) -> str:
        return f"{self.node.value}/{self.gpu.value}"

    @classmethod
    def parse(cls, text: str) -> "PolicyPair":
        """`binpack/spread`; ValueError names the bad part."""
        parts = text.split("/")
        if len(parts) != 2:
            raise ValueError(f"policy {text!r} must be NODE/GPU, e.g. binpack/spread")
        known = ", ".join(p.value for p in Policy)
        values = []
        for part, what in zip(parts, ("node", "GPU"), strict=True):
            try:
                values.append(Policy(part.strip().lower()))
            except ValueError:
                raise ValueError(
                    f"{what} policy {part!r} in {text!r} is not one of: {known}"
                ) from None
        return cls(values[0], values[1])


HAMI_POLICIES = (Policy.BINPACK, Policy.SPREAD)
ALL_PAIRS = tuple(PolicyPair(node, gpu) for node in HAMI_POLICIES for gpu in HAMI_POLICIES)
HAMI_DEFAULT = PolicyPair(Policy.BINPACK, Policy.SPREAD)


class State(Enum):
    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(slots=True)
class SimPod:
    index: int
    arrival: PodArrival
    key: str
    namespace: str
    plan: PodPlan
    shape: Shape
    priority: int = 0
    state: State = State.PENDING
    node: str = ""
    waiting_since: float = 0.0  # arrival, or the last eviction
    placed_at: float = -1.0
    finish_at: float = -1.0
    rejections: dict[str, NodeRejection] = field(default_factory=dict)
    quota_nodes: set[str] = field(default_factory=set)


_INELIGIBLE = frozenset({Reason.TYPE_MISMATCH, Reason.UUID_MISMATCH, Reason.MODE})
_FINISH, _ARRIVE = 0, 1  # at the same instant, capacity frees before new pods come


class Simulation:
    """One run of a scenario's pods under one policy pair, or with DRA (`DraMode`: claims
    allocated by kube-scheduler's allocator; no preemption, no vgpu quota at scheduling).
    Call `run()` once."""

    def __init__(
        self,
        scenario: Scenario,
        pair: PolicyPair | DraMode,
        pods: Sequence[PodArrival],
        *,
        incremental: bool = True,
        typical: TypicalRequest | None = None,
        admissions: Admissions | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """`admissions` may be shared by runs of the same `pods` (they admit alike)."""
        self._scenario = scenario
        self._pair = pair
        self._arrivals = pods
        self._incremental = incremental
        self._typical = typical
        self._clock = clock
        vendor = NVIDIA
        policies = PodPolicies() if isinstance(pair, DraMode) else PodPolicies(pair.node, pair.gpu)
        self._config = SchedulingConfig(vendor=vendor, policies=policies)
        self._admissions = admissions or Admissions(vendor)
        self.ledger = Ledger()
        self.quota = QuotaBook()
        for node in cluster_nodes(scenario, vendor):
            self.ledger.set_node(node.name, node.devices(vendor), node.cordoned(vendor))
        self._nodes = self.ledger.nodes()
        self._devices = {n: self.ledger.view(n).devices for n in self._nodes}
        self._dra = DraPlacer(self._devices) if isinstance(pair, DraMode) else None
        self._limited: set[str] = set()
        for namespace in scenario.namespaces:
            if namespace.quota is not None:
                limits = limits_from_hard(_hard(namespace.quota), vendor)
                self.quota.set_limits(namespace.name, limits)
                self._limited.add(namespace.name)
        self._cache = InfeasibleCache()
        self.pods: list[SimPod] = []
        self._pending: dict[str, SimPod] = {}
        self._denied: list[str] = []
        self._events: list[tuple[float, int, int]] = []
        self._freed: set[str] = set()
        self._refunded: set[str] = set()
        self._now = 0.0
        self._running = 0
        self._attempts = 0
        self._decide_calls = 0
        self._schedule_seconds = 0.0
        self._preemption = scenario.preemption and self._dra is None
        self._running_on: dict[str, dict[str, SimPod]] = {n: {} for n in self._nodes}
        self._preemptors = 0
        self._evicted = 0
        self._recent = RecentShapes()  # what FGD weighs, as the scheduler keeps it

    # running ---------------------------------------------------------------------------------
    def run(self, progress: Progress | None = None) -> RunResult:
        started = self._clock()
        typical = self._typical or typical_request(self._scenario, self._arrivals, self._admissions)
        sampler = Sampler(self._devices, typical, slices_bound=self._dra is None)
        events = self._events
        for index, arrival in enumerate(self._arrivals):
            heapq.heappush(events, (arrival.time, _ARRIVE, index))
        duration, step = self._scenario.duration, self._scenario.sample_every
        samples = int(duration // step)
        times = [k * step for k in range(samples + 1)]
        if times[-1] < duration:
            times.append(duration)
        for sample_time in times:
            self._advance(sample_time)
            sampler.sample(sample_time, self.ledger, len(self._pending), self._running)
            if progress is not None:
                progress(sample_time / duration)
        return self._result(sampler, typical, self._clock() - started)

    def _advance(self, until: float) -> None:
        events = self._events
        while events and events[0][0] <= until:
            moment, kind, index = heapq.heappop(events)
            self._now = moment
            if kind == _FINISH:
                pod = self.pods[index]
                if pod.state is not State.RUNNING or pod.finish_at != moment:
                    continue  # evicted before this end: its run was cut short
                self._finish(pod)
                if events and events[0][0] == moment and events[0][1] == _FINISH:
                    continue  # free everything that ends now before retrying
                self._retry_pending()
            else:
                self._arrive(index, self._arrivals[index])

    def _arrive(self, index: int, arrival: PodArrival) -> None:
        manifest = arrival.manifest
        namespace = manifest["metadata"]["namespace"]
        budget = self.quota.budget(namespace)
        plan = self._admissions.plan(index, manifest, budget, self._config.policies)
        if isinstance(plan, str):
            self._denied.append(plan)
            return
        if plan.policies.fragmentation:
            shapes = [CardShape.of(r, plan.selector) for r in plan.requests if r is not None]
            self._recent.observe(plan.key, shapes)
            cards = self.ledger.card_counts() if plan.policies.balanced else ()
            policies = replace(plan.policies, workload=self._recent.current(), cards=cards)
            plan = replace(plan, policies=policies)
        priority = int(manifest["spec"].get("priority", 0))
        pod = SimPod(len(self.pods), arrival, plan.key, namespace, plan, shape_of(plan), priority)
        pod.waiting_since = arrival.time
        self.pods.append(pod)
        if self._attempt(pod, self._nodes):
            return
        evicted = self._preempt_for(pod) if self._preemption else []
        if pod.state is not State.RUNNING:
            self._pending[pod.key] = pod
        if evicted:
            self._retry_pending()  # older pods may fit in what the eviction left over
            for victim in evicted:  # recreated pods: every node is new to them
                if not self._attempt(victim, self._nodes):
                    self._pending[victim.key] = victim

    def _finish(self, pod: SimPod) -> None:
        self._release(pod)
        pod.state = State.FINISHED

    def _release(self, pod: SimPod) -> None:
        self.ledger.release(pod.key)
        self.quota.refund(pod.key)
        if self._dra is not None:
            self._dra.released(pod.key)
        del self._running_on[pod.node][pod.key]
        self._running -= 1
        self._freed.add(pod.node)
        self._cache.node_freed(pod.node)
        if pod.namespace in self._limited:
            self._refunded.add(pod.namespace)

    def _preempt_for(self, pod: SimPod) -> list[SimPod]:
        """Evict the cheapest victims that let `pod` fit, on the node where they cost least,
        and place it there; the evicted pods (none when no node has such victims)."""
        started = self._clock()
        budget = self.quota.budget(pod.namespace)
        best: tuple[Cost, str, tuple[Victim, ...]] | None = None
        for node, running in self._running_on.items():
            candidates = [self._victim(p) for p in running.values() if p.priority < pod.priority]
            if not candidates:
                continue
            chosen = choose_victims(
                pod.plan, pod.priority, self.ledger.view(node), candidates, budget
            )
            if chosen and (best is None or (cost(chosen), node) < best[:2]):
                best = (cost(chosen), node, chosen)
        evicted: list[SimPod] = []
        if best is not None:
            _, node, chosen = best
            evicted = [self._running_on[node][victim.key] for victim in chosen]
            for victim_pod in evicted:
                self._evict(victim_pod)
            decision = self.ledger.decide(pod.plan, [node], self.quota.budget(pod.namespace))
            self._decide_calls += 1
            if isinstance(decision, Placement):
                self._place(pod, decision)
                self._preemptors += 1
            else:  # choose_victims promised a fit: a disagreement to report, not to hide
                log.error("pod %s does not fit on %s after preemption", pod.key, node)
        self._schedule_seconds += self._clock() - started
        return evicted

    def _victim(self, pod: SimPod) -> Victim:
        allocation = self.ledger.allocation(pod.key)
        assert allocation is not None  # every running pod holds its grants
        return Victim(
            pod.key,
            pod.namespace,
            pod.priority,
            dict(allocation.footprint),
            pod_charge(allocation.grants, pod.plan.init_count),
        )

    def _evict(self, pod: SimPod) -> None:
        """The pod's controller recreates it: it waits again and runs anew once placed."""
        self._release(pod)
        self._evicted += 1
        pod.state, pod.node, pod.placed_at = State.PENDING, "", -1.0
        pod.waiting_since = self._now

    def _retry_pending(self) -> None:
        """Give every waiting pod, oldest first, a try on the capacity that just freed."""
        freed, refunded = self._freed, self._refunded
        self._freed, self._refunded = set(), set()
        for pod in list(self._pending.values()):
            if not self._incremental:
                candidates = self._nodes
            else:
                # only nodes that changed since the pod's last try can answer differently
                changed = freed | pod.quota_nodes if pod.namespace in refunded else freed
                if not changed:
                    continue
                candidates = sorted(changed)
            if self._attempt(pod, candidates):
                del self._pending[pod.key]

    def _attempt(self, pod: SimPod, candidates: Sequence[str]) -> bool:
        """One scheduling cycle for `pod` on `candidates`; True when it was placed."""
        started = self._clock()
        self._attempts += 1
        unknown = []
        for node in candidates:
            known = self._cache.lookup(node, pod.shape) if self._incremental else None
            if known is None:
                unknown.append(node)
            else:
                pod.rejections[node] = known
                pod.quota_nodes.discard(node)
        placed = False
        if unknown:
            self._decide_calls += 1
            decision = self._decide(pod, unknown)
            if isinstance(decision, Placement):
                self._place(pod, decision)
                placed = True
            else:
                self._remember(pod, decision)
        self._schedule_seconds += self._clock() - started
        return placed

    def _decide(
        self, pod: SimPod, nodes: Sequence[str], explain: bool = False
    ) -> Placement | NoPlacement:
        if self._dra is not None:
            return self._dra.decide(pod.plan, nodes, explain)
        return self.ledger.decide(pod.plan, nodes, self.quota.budget(pod.namespace))

    def _remember(self, pod: SimPod, decision: NoPlacement) -> None:
        for node, rejection in decision.rejections.items():
            pod.rejections[node] = rejection
            if involves_quota(rejection):
                pod.quota_nodes.add(node)
            else:
                pod.quota_nodes.discard(node)
                self._cache.remember(node, pod.shape, rejection)

    def _place(self, pod: SimPod, placement: Placement) -> None:
        # the scheduler writes the grants as annotations; the node side reads them back
        grants = decode_granted(
            encode_pod_grants(placement.grants), mig_reservations(placement.grants)
        )
        # DRA has no split count: its shares may outnumber the card's slices
        self.ledger.grant(
            pod.key, placement.node, grants, pod.plan.init_count, strict=self._dra is None
        )
        if self._dra is not None:
            self._dra.placed(pod.key, placement.node)
        self.quota.charge(pod.key, pod.namespace, grants, pod.plan.init_count)
        pod.state, pod.node, pod.placed_at = State.RUNNING, placement.node, self._now
        pod.rejections.clear()
        pod.quota_nodes.clear()
        self._running_on[placement.node][pod.key] = pod
        self._running += 1
        pod.finish_at = self._now + pod.arrival.runtime
        heapq.heappush(self._events, (pod.finish_at, _FINISH, pod.index))

    # results ---------------------------------------------------------------------------------
    def _final_rejections(self) -> list[tuple[str, NoPlacement]]:
        """Why each pod still waits, asked of every node as the cluster is at the end.

        (During the run a pod's reasons come from each node's latest check, which may be older.)
        """
        refusals = []
        for pod in self._pending.values():
            decision = self._decide(pod, self._nodes, explain=True)
            if isinstance(decision, Placement):  # would mean a missed retry: a bug to report
                log.error("pod %s is Pending but fits on %s", pod.key, decision.node)
                continue
            refusals.append((pod.key, decision))
        return refusals

    def _result(self, sampler: Sampler, typical: TypicalRequest, wall: float) -> RunResult:
        placed = [p for p in self.pods if p.placed_at >= 0]
        waits = [p.placed_at - p.waiting_since for p in placed]
        waiting = [w for w in waits if w > 0]
        series = sampler.series
        return RunResult(
            policy=self._pair.label,
            submitted=len(self._arrivals),
            denied=len(self._denied),
            placed=len(placed),
            placed_at_once=len(waits) - len(waiting),
            pending_end=len(self._pending),
            running_end=self._running,
            finished=sum(1 for p in self.pods if p.state is State.FINISHED),
            wait_mean=mean(waiting),
            wait_p95=percentile(waits, 95),
            pending_reasons=pending_reasons(self._final_rejections()),
            denied_reasons=denial_reasons(self._denied),
            memory_mean=mean(series.memory),
            memory_p95=percentile(series.memory, 95),
            cores_mean=mean(series.cores),
            cores_p95=percentile(series.cores, 95),
            slices_mean=mean(series.slices),
            slices_p95=percentile(series.slices, 95),
            fragmentation_mean=mean(series.fragmentation),
            fragmentation_p95=percentile(series.fragmentation, 95),
            stranded_of_free_mean=mean(series.stranded_of_free),
            attempts=self._attempts,
            decide_calls=self._decide_calls,
            schedule_seconds=self._schedule_seconds,
            wall_seconds=wall,
            typical=typical,
            series=series,
            preemptions=(
                Preemptions(self._preemptors, self._evicted) if self._preemption else None
            ),
        )


def _hard(quota: Quota) -> dict[str, str]:
    """The scenario's quota as a ResourceQuota `spec.hard`."""
    hard = {}
    for resource, value in (
        (NVIDIA.memory_resource, quota.gpumem),
        (NVIDIA.cores_resource, quota.gpucores),
        (NVIDIA.count_resource, quota.gpus),
    ):
        if value is not None:
            hard[f"limits.{resource}"] = str(value)
    return hard


def typical_request(
    scenario: Scenario, pods: Sequence[PodArrival], admissions: Admissions | None = None
) -> TypicalRequest:
    """The median per-card memory (MiB) and cores the workload asks for, after admission.

    Percentages are resolved on the largest card. Free memory on a card that cannot take this
    request counts as stranded (fragmentation). The same for every policy pair.
    """
    admissions = admissions or Admissions()
    card_memory = max(int(p.memory * p.memory_scaling) for p in scenario.nodes)
    memories: list[int] = []
    cores: list[int] = []
    for index, arrival in enumerate(pods):
        plan = admissions.plan(index, arrival.manifest, Budget(), PodPolicies())
        for request in () if isinstance(plan, str) else plan.requests:
            if request is not None:
                memories.append(request.memory or card_memory * request.memory_percent // 100)
                cores.append(request.cores)
    return TypicalRequest(_median(memories), _median(cores))


def pending_reasons(pods: Sequence[tuple[str, NoPlacement]]) -> Reasons:
    """Each waiting pod counted once, by the reason most of the nodes gave.

    Nodes the pod could never use (wrong card model, excluded cards) count only when no node
    gave another reason: a pod pinned to A100s waits because the A100 nodes are full, not
    because the T4 nodes are T4s.
    """
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for key, refusal in pods:
        relevant = [r for r in refusal.rejections.values() if r.reason not in _INELIGIBLE]
        relevant = relevant or list(refusal.rejections.values())
        if not relevant:
            continue
        by_reason = Counter(r.reason for r in relevant)
        top = max(sorted(by_reason, key=lambda r: r.value), key=lambda r: by_reason[r])
        reason = phrase(top)
        counts[reason] += 1
        if reason not in examples:
            sample = next(r for r in relevant if r.reason is top)
            examples[reason] = f"{key}: {refusal.message}; e.g. {sample.node}: {sample.message}"
    return _reasons(counts, examples)


def denial_reasons(messages: Sequence[str]) -> Reasons:
    """Admission denials grouped by the message's first clause."""
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for message in messages:
        reason = message.split(":")[0]
        counts[reason] += 1
        examples.setdefault(reason, message)
    return _reasons(counts, examples)


def _reasons(counts: Counter[str], examples: dict[str, str]) -> Reasons:
    ordered = tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return Reasons(ordered, tuple((r, examples[r]) for r, _ in ordered))


def _median(values: list[int]) -> int:
    return int(statistics.median_low(values)) if values else 0
