"""The composition root of `vgpu scheduler`: config -> cluster adapter -> state -> service -> app.

Tests and embedders override `backend` (for instance with a FakeCluster) or any other provider.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dependency_injector import containers, providers

from vgpu.app.scheduler.config import SchedulerConfig
from vgpu.app.scheduler.fake_mode import PodRecorder, load_fake_cluster
from vgpu.app.scheduler.follower import ClusterFollower
from vgpu.app.scheduler.http import create_app
from vgpu.app.scheduler.metrics import SchedulerMetrics
from vgpu.app.scheduler.runtime import Leadership, Lifecycle, SchedulerRuntime
from vgpu.app.scheduler.service import SchedulerService
from vgpu.app.scheduler.state import SchedulerState
from vgpu.domain import Pod
from vgpu.ports.cluster import ClusterPort


@dataclass(frozen=True, slots=True)
class ClusterBackend:
    """A cluster adapter and what comes with it: cache lifecycle, leader election, and (fake
    mode only) a hook that creates pods the scheduler is asked about."""

    port: ClusterPort
    lifecycle: Lifecycle | None = None
    leadership: Leadership | None = None
    remember_pod: Callable[[Pod], None] | None = None


def build_backend(config: SchedulerConfig, fake_cluster_file: Path | None) -> ClusterBackend:
    """The fake cluster from a file, or the Kubernetes adapter."""
    if fake_cluster_file is not None:
        cluster = load_fake_cluster(fake_cluster_file, config.vendor())
        return ClusterBackend(cluster, remember_pod=PodRecorder(cluster))
    from vgpu.app.scheduler.kube import kubernetes_backend  # the client is heavy; load on use

    port, lifecycle, leadership = kubernetes_backend(config)
    return ClusterBackend(port, lifecycle, leadership)


class SchedulerContainer(containers.DeclarativeContainer):
    """Wiring for one scheduler process."""

    config = providers.Dependency(instance_of=SchedulerConfig)
    fake_cluster_file: providers.Object[Path | None] = providers.Object(None)
    clock = providers.Object(time.time)

    backend = providers.Singleton(build_backend, config, fake_cluster_file)
    state = providers.Singleton(SchedulerState)
    vendor = providers.Callable(lambda c: c.vendor(), config)
    memory_factor = providers.Callable(lambda c: c.defaults.memory_factor, config)

    follower = providers.Singleton(ClusterFollower, state, vendor, memory_factor, clock)
    runtime = providers.Singleton(
        SchedulerRuntime,
        cluster=backend.provided.port,
        state=state,
        follower=follower,
        clock=clock,
        reservation_timeout=config.provided.reservation_timeout,
        sync_timeout=config.provided.sync_timeout,
        lifecycle=backend.provided.lifecycle,
        leadership=backend.provided.leadership,
    )
    service = providers.Singleton(
        SchedulerService,
        cluster=backend.provided.port,
        state=state,
        config=config,
        is_leader=runtime.provided.is_leader,
        clock=clock,
        remember_pod=backend.provided.remember_pod,
    )
    metrics = providers.Singleton(SchedulerMetrics, state, vendor, runtime.provided.is_leader)
    app = providers.Singleton(
        create_app,
        service=service,
        metrics=metrics,
        readiness=runtime.provided.readiness,
        on_start=runtime.provided.start,
        on_stop=runtime.provided.stop,
    )
