"""Explain one pod against a cluster: read nodes, quotas and pods into the scheduler's state the
way the scheduler does (`ClusterFollower.rebuild`), then ask the domain. Reads only.

It does not read the grant-signing keys (a person running it seldom may read that Secret): a
grant counts when its pod names the scheduler, as with signing off. Forged grants can therefore
make a node look fuller here than the scheduler sees it, never emptier."""

from collections.abc import Callable
from dataclasses import replace

from vgpu.app.explain.dra_inquiry import DraInquiry
from vgpu.app.scheduler.follower import ClusterFollower
from vgpu.app.scheduler.state import SchedulerState
from vgpu.domain import Pod, SchedulingConfig, plan_pod
from vgpu.domain.dra import ClaimsExplanation
from vgpu.domain.explain import Explanation, Held, explain
from vgpu.domain.preemption import Victim
from vgpu.domain.quota import pod_charge
from vgpu.ports.cluster import ClusterPort


class NotAGpuPod(ValueError):
    """The pod asks for no GPU of the configured vendor: there is nothing to explain."""


class Inquiry:
    """Why a pod does or does not fit `cluster` now, from `state` as `follower` fills it."""

    def __init__(
        self,
        cluster: ClusterPort,
        state: SchedulerState,
        follower: ClusterFollower,
        scheduling: SchedulingConfig,
        dra: Callable[[], DraInquiry],
    ) -> None:
        """`dra` gives the inquiry for pods that ask for devices through DRA claims (made
        when one does: it reads the DRA objects)."""
        self._cluster = cluster
        self._state = state
        self._follower = follower
        self._scheduling = scheduling
        self._dra = dra

    def explain(self, pod: Pod) -> Explanation | ClaimsExplanation:
        """Raises DomainError for a pod whose GPU request (or one of its own claims) cannot be
        read and NotAGpuPod for a pod that asks for neither. A pod that already holds cards (or
        is bound to a node) is explained as if it were scheduled again, left out of the usage,
        and `held` says where it is."""
        if pod.claims:
            return self._dra().explain(pod)
        scheduling, cluster, state = self._scheduling, self._cluster, self._state
        self._follower.rebuild(cluster)  # first: planning reads the cluster's cards
        plan = plan_pod(pod, scheduling)
        if plan is None:
            raise NotAGpuPod(
                f"pod {pod.key} asks for no {scheduling.vendor.count_resource} and names no "
                "resource claims"
            )
        names = sorted({n.name for n in cluster.list_nodes()} | set(state.ledger.nodes()))
        views, broken = state.snapshot_views(names, exclude_pod=plan.key)
        budget = state.budget(plan.namespace, plan.key, plan.init_count)
        pods = {p.key: p for p in cluster.list_pods()}
        holders = []
        for allocation in state.ledger.pods():
            if allocation.pod == plan.key:
                continue
            running = pods.get(allocation.pod)
            init_count = running.init_count if running is not None else 0
            namespace = allocation.pod.partition("/")[0]
            victim = Victim(
                allocation.pod,
                namespace,
                running.priority if running is not None else 0,
                dict(allocation.footprint),
                pod_charge(allocation.grants, init_count),
            )
            holders.append((allocation.node, victim))
        explanation = explain(plan, views, budget, broken, holders)
        own = state.ledger.allocation(plan.key)
        if own is not None:
            return replace(explanation, held=Held(own.node, pod.phase, own.grants))
        if pod.node_name:
            return replace(explanation, held=Held(pod.node_name, pod.phase))
        return explanation
