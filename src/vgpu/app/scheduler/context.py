"""What the scheduler's verbs share: collaborators, and the checks every verb makes first.

The body kube-scheduler sends is trusted as little as possible: the pod is looked up in the
cluster (the cache, else a live read) and must match the body's uid, name our scheduler and be
unbound; every decision is then made on the cluster's copy. Refusals name no pod in an Event
(the caller may have invented it), they are logged.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass

from vgpu.app.scheduler.config import SchedulerConfig
from vgpu.app.scheduler.explanations import ExplanationStore
from vgpu.app.scheduler.fence import Fence
from vgpu.app.scheduler.grants import PodWriter
from vgpu.app.scheduler.pod_events import PodEvents
from vgpu.app.scheduler.pod_locks import PodLocks
from vgpu.app.scheduler.recorder import OccupancyRecorder
from vgpu.app.scheduler.revocation import Revoker
from vgpu.app.scheduler.state import SchedulerState
from vgpu.app.scheduler.trust import GrantTrust
from vgpu.domain import Pod, SchedulingConfig, Vendor
from vgpu.ports.cluster import ClusterError, ClusterPort

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class VerbContext:
    cluster: ClusterPort
    state: SchedulerState
    config: SchedulerConfig
    scheduling: SchedulingConfig
    trust: GrantTrust
    writer: PodWriter
    revoker: Revoker
    events: PodEvents
    fence: Fence
    pod_locks: PodLocks
    clock: Callable[[], float]
    recorder: OccupancyRecorder
    explanations: ExplanationStore | None = None

    @property
    def vendor(self) -> Vendor:
        return self.scheduling.vendor

    def unready(self) -> str:
        if not self.state.synced:
            return "the scheduler is still reading the cluster; try again shortly"
        if not self.fence.leading:
            return "this scheduler replica is not the leader; it does not schedule"
        return ""

    def event(self, pod: Pod, reason: str, message: str, *, warning: bool = False) -> None:
        self.events.record(pod.namespace, pod.name, reason, message, warning=warning)

    def cluster_pod(self, namespace: str, name: str, uid: str, verb: str) -> Pod | str:
        """The cluster's copy of the pod a verb names, or why the verb is refused."""
        key = f"{namespace}/{name}"
        try:
            pod = self.cluster.get_pod(namespace, name) or self.cluster.read_pod(namespace, name)
        except ClusterError as exc:
            return self._refuse(verb, f"cannot read pod {key}: {exc}")
        if pod is None:
            return self._refuse(verb, f"pod {key} not found")
        if uid != pod.uid:
            return self._refuse(verb, f"pod {key} has uid {pod.uid}, the request names {uid!r}")
        if pod.scheduler_name != self.config.scheduler_name:
            return self._refuse(
                verb,
                f"pod {key} names scheduler {pod.scheduler_name!r}, "
                f"not {self.config.scheduler_name!r}",
            )
        return pod

    @staticmethod
    def _refuse(verb: str, message: str) -> str:
        log.warning("%s refused: %s", verb, message)
        return message
