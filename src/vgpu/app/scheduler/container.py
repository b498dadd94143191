"""The composition root of `vgpu scheduler`: config -> cluster adapter -> state -> service -> app.

Tests and embedders override `backend` (for instance with a FakeCluster) or any other provider.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dependency_injector import containers, providers

from vgpu.adapters.fake.keys import FakeGrantKeys
from vgpu.app.scheduler.config import SchedulerConfig
from vgpu.app.scheduler.fake_mode import PodRecorder, load_fake_cluster, sign_listed_grants
from vgpu.app.scheduler.fence import Fence
from vgpu.app.scheduler.follower import ClusterFollower
from vgpu.app.scheduler.grants import PodWriter
from vgpu.app.scheduler.http import create_app
from vgpu.app.scheduler.keys import GrantKeys, new_key_ring
from vgpu.app.scheduler.metrics import SchedulerMetrics
from vgpu.app.scheduler.pod_events import ClusterPodEvents
from vgpu.app.scheduler.revocation import Revoker
from vgpu.app.scheduler.runtime import Leadership, Lifecycle, SchedulerRuntime
from vgpu.app.scheduler.service import SchedulerService
from vgpu.app.scheduler.state import SchedulerState
from vgpu.app.scheduler.trust import GrantTrust
from vgpu.domain import Pod
from vgpu.ports.cluster import ClusterPort
from vgpu.ports.keys import GrantKeyPort


@dataclass(frozen=True, slots=True)
class ClusterBackend:
    """A cluster adapter and what comes with it: the grant key store, cache lifecycle, leader
    election, and (fake mode only) a hook that creates pods the scheduler is asked about."""

    port: ClusterPort
    keys: GrantKeyPort
    lifecycle: Lifecycle | None = None
    leadership: Leadership | None = None
    remember_pod: Callable[[Pod], None] | None = None


def build_backend(config: SchedulerConfig, fake_cluster_file: Path | None) -> ClusterBackend:
    """The fake cluster from a file (with a fresh key ring), or the Kubernetes adapter."""
    if fake_cluster_file is not None:
        cluster = load_fake_cluster(fake_cluster_file, config.vendor())
        ring = new_key_ring(datetime.now(UTC))
        if config.signing.enabled:
            sign_listed_grants(cluster, ring, config.vendor())
        return ClusterBackend(cluster, FakeGrantKeys(ring), remember_pod=PodRecorder(cluster))
    from vgpu.app.scheduler.kube import kubernetes_backend  # the client is heavy; load on use

    port, lifecycle, leadership, keys = kubernetes_backend(config)
    return ClusterBackend(port, keys, lifecycle, leadership)


def build_keys(config: SchedulerConfig, backend: ClusterBackend) -> GrantKeys | None:
    return GrantKeys(backend.keys) if config.signing.enabled else None


def build_trust(config: SchedulerConfig, keys: GrantKeys | None) -> GrantTrust:
    return GrantTrust(config.vendor(), config.scheduler_name, None if keys is None else keys.ring)


def _leader_check(backend: ClusterBackend) -> Callable[[], bool]:
    leadership = backend.leadership
    return lambda: leadership is None or leadership.is_leader


def build_revoker(
    config: SchedulerConfig, backend: ClusterBackend, is_leader: Callable[[], bool]
) -> Revoker:
    writer = PodWriter(backend.port, config.vendor(), Fence(is_leader))
    return Revoker(writer, config.vendor())


class SchedulerContainer(containers.DeclarativeContainer):
    """Wiring for one scheduler process."""

    config = providers.Dependency(instance_of=SchedulerConfig)
    fake_cluster_file: providers.Object[Path | None] = providers.Object(None)
    clock = providers.Object(time.time)

    backend = providers.Singleton(build_backend, config, fake_cluster_file)
    state = providers.Singleton(SchedulerState)
    vendor = providers.Callable(lambda c: c.vendor(), config)
    memory_factor = providers.Callable(lambda c: c.defaults.memory_factor, config)

    keys = providers.Singleton(build_keys, config, backend)
    trust = providers.Singleton(build_trust, config, keys)
    follower = providers.Singleton(ClusterFollower, state, vendor, memory_factor, clock, trust)
    leader_check = providers.Callable(_leader_check, backend)
    revoker = providers.Singleton(build_revoker, config, backend, leader_check)
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
        revoker=revoker,
        keys=keys,
        key_refresh=config.provided.signing.refresh_period,
    )
    events = providers.Singleton(
        ClusterPodEvents, backend.provided.port, runtime.provided.is_leader
    )
    service = providers.Singleton(
        SchedulerService,
        cluster=backend.provided.port,
        state=state,
        config=config,
        trust=trust,
        revoker=revoker,
        is_leader=runtime.provided.is_leader,
        clock=clock,
        remember_pod=backend.provided.remember_pod,
        events=events,
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
