"""The composition root of `vgpu scheduler`: config -> cluster adapter -> state -> service ->
apps -> listeners.

Tests and embedders override `backend` (for instance with a FakeCluster) or any other provider.
"""

import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from dependency_injector import containers, providers
from fastapi import FastAPI

from vgpu.adapters.fake.keys import FakeGrantKeys
from vgpu.app.fake_mode import PodRecorder, fake_grant_keys, load_fake_cluster, load_fake_dra
from vgpu.app.metrics_guard import MetricsGuard
from vgpu.app.scheduler import http
from vgpu.app.scheduler.bind import BindVerb
from vgpu.app.scheduler.certs import WebhookCerts
from vgpu.app.scheduler.config import SchedulerConfig
from vgpu.app.scheduler.context import VerbContext
from vgpu.app.scheduler.dra_admission import ClusterCards, DraAdmission
from vgpu.app.scheduler.events import EventQueue, EventsCollector
from vgpu.app.scheduler.explanations import ExplanationStore
from vgpu.app.scheduler.fence import Fence
from vgpu.app.scheduler.filter import FilterVerb
from vgpu.app.scheduler.follower import ClusterFollower
from vgpu.app.scheduler.grants import PodWriter
from vgpu.app.scheduler.handshake import NodeHandshake
from vgpu.app.scheduler.keys import GrantKeys
from vgpu.app.scheduler.late_grants import LateGrants
from vgpu.app.scheduler.listeners import Listener
from vgpu.app.scheduler.metrics import SchedulerMetrics
from vgpu.app.scheduler.occupancy import OccupancyBook
from vgpu.app.scheduler.pod_locks import PodLocks
from vgpu.app.scheduler.preempt import Preempter
from vgpu.app.scheduler.recorder import OccupancyRecorder
from vgpu.app.scheduler.revocation import Revoker
from vgpu.app.scheduler.routes import Routes
from vgpu.app.scheduler.runtime import Chore, Leadership, Lifecycle, SchedulerRuntime
from vgpu.app.scheduler.service import SchedulerService
from vgpu.app.scheduler.shapes import ShapeWindow
from vgpu.app.scheduler.state import SchedulerState
from vgpu.app.scheduler.takeover import REPORT_PERIOD, TakeoverReport
from vgpu.app.scheduler.tls import WebhookTls, mutual_tls_context
from vgpu.app.scheduler.trust import GrantTrust
from vgpu.app.secure_metrics import metrics_guard, metrics_tls
from vgpu.domain import Pod
from vgpu.ports.cluster import ClusterPort
from vgpu.ports.dra import ClaimTemplatePort, DraReadPort
from vgpu.ports.keys import GrantKeyPort
from vgpu.ports.webhook_tls import WebhookTLSPort


@dataclass(frozen=True, slots=True)
class ClusterBackend:
    """A cluster adapter and what comes with it: the grant key store, cache lifecycle, leader
    election, and (fake mode only) a hook that creates pods the scheduler is asked about."""

    port: ClusterPort
    keys: GrantKeyPort
    lifecycle: Lifecycle | None = None
    leadership: Leadership | None = None
    remember_pod: Callable[[Pod], None] | None = None
    webhook_certs: WebhookTLSPort | None = None  # where self-managed webhook certificates live


def build_backend(config: SchedulerConfig, fake_cluster_file: Path | None) -> ClusterBackend:
    """The fake cluster from a file (with a fresh key ring), or the Kubernetes adapter."""
    if fake_cluster_file is not None:
        cluster = load_fake_cluster(fake_cluster_file, config.vendor())
        # with signing off no key is ever read: nothing to sign the listed grants with
        signing = config.signing.enabled
        store = fake_grant_keys(cluster, config.vendor()) if signing else FakeGrantKeys()
        return ClusterBackend(cluster, store, remember_pod=PodRecorder(cluster))
    from vgpu.app.scheduler.kube import kubernetes_backend  # the client is heavy; load on use

    port, lifecycle, leadership, keys, certs = kubernetes_backend(config)
    return ClusterBackend(port, keys, lifecycle, leadership, webhook_certs=certs)


def build_dra_admission(config: SchedulerConfig, fake_cluster_file: Path | None) -> DraAdmission:
    """The webhook's DRA mode over the fake cluster file's DRA objects, or the API's."""
    if fake_cluster_file is not None:
        objects = load_fake_dra(fake_cluster_file)
        slices: DraReadPort = objects
        templates: ClaimTemplatePort = objects
    else:
        from vgpu.app.scheduler.kube import kubernetes_dra  # the client is heavy; load on use

        slices, templates = kubernetes_dra(config)
    dra = config.dra
    cards = ClusterCards(slices, dra.driver_name, dra.cards_refresh)
    return DraAdmission(config.dra_admission(), cards, templates)


def build_keys(config: SchedulerConfig, backend: ClusterBackend) -> GrantKeys | None:
    return GrantKeys(backend.keys) if config.signing.enabled else None


def build_trust(config: SchedulerConfig, keys: GrantKeys | None) -> GrantTrust:
    """The trust rule; taking over from HAMi, its scheduler's unsigned grants are believed."""
    takeover = config.takeover
    hami = frozenset(takeover.hami_scheduler_names) if takeover.from_hami else frozenset()
    ring = None if keys is None else keys.ring
    return GrantTrust(config.vendor(), config.scheduler_name, ring, unsigned_from=hami)


def build_handshake(
    config: SchedulerConfig,
    fake_cluster_file: Path | None,
    backend: ClusterBackend,
    state: SchedulerState,
    follower: ClusterFollower,
    is_leader: Callable[[], bool],
) -> NodeHandshake | None:
    """HAMi's node health pass; none in fake mode, where no kubelet counts a node's GPUs."""
    if fake_cluster_file is not None:
        return None
    return NodeHandshake(
        backend.port, state, follower, config.vendor(), config.hami_version, _local_now, is_leader
    )


def _local_now() -> datetime:
    """The scheduler's local time, the zone HAMi writes and reads handshake stamps in."""
    return datetime.now().astimezone()


def _leader_check(backend: ClusterBackend) -> Callable[[], bool]:
    leadership = backend.leadership
    return lambda: leadership is None or leadership.is_leader


def build_metrics(
    config: SchedulerConfig,
    state: SchedulerState,
    is_leader: Callable[[], bool],
    events: EventQueue,
    book: OccupancyBook,
) -> SchedulerMetrics:
    metrics = SchedulerMetrics(
        state,
        config.vendor(),
        is_leader,
        legacy=config.legacy_metrics,
        unsigned_counted=lambda: len(book.unsigned()),
    )
    metrics.registry.register(EventsCollector(events))
    return metrics


# how often the leader records counted pods in their nodes' occupancy records, and revokes
# late grants: often enough that a restart soon after finds them
RECORD_PERIOD = 2.0
LATE_GRANT_PERIOD = 0.5


def build_chores(
    recorder: OccupancyRecorder, late_grants: LateGrants, report: TakeoverReport
) -> list[Chore]:
    return [
        Chore("vgpu-occupancy-recorder", RECORD_PERIOD, recorder.record_now),
        Chore("vgpu-late-grants", LATE_GRANT_PERIOD, late_grants.settle),
        Chore("vgpu-takeover-report", REPORT_PERIOD, report.report),
    ]


@dataclass(frozen=True, slots=True)
class WebhookTlsSetup:
    """The webhook's TLS context, and the rotator when its certificates are self-managed."""

    tls: WebhookTls | None = None
    certs: WebhookCerts | None = None


def build_webhook_tls(
    config: SchedulerConfig, backend: Callable[[], ClusterBackend]
) -> WebhookTlsSetup:
    """Plain HTTP, the configured files, or self-managed certificates (issued or read from
    their Secret and written to the files before the context loads them). Only the last
    needs the cluster: `backend` is called then, so a bad file is reported before anything
    else is even read."""
    store = backend().webhook_certs if config.webhook_tls is not None else None
    if config.webhook_tls is not None and store is not None:
        tls: WebhookTls | None = None

        def reload(cert: Path, key: Path) -> None:
            if tls is not None:
                tls.reload(cert, key)

        certs = WebhookCerts(config.webhook_tls, store, reload)
        tls = WebhookTls(*certs.ensure())
        return WebhookTlsSetup(tls, certs)
    if config.tls_cert is None or config.tls_key is None:
        return WebhookTlsSetup()
    return WebhookTlsSetup(WebhookTls(config.tls_cert, config.tls_key))


def build_extender_tls(config: SchedulerConfig) -> ssl.SSLContext | None:
    """The extender's mutual-TLS context, or None for plain HTTP on loopback."""
    e = config.extender
    if e.tls_cert is None or e.tls_key is None or e.client_ca is None:
        return None
    return mutual_tls_context(e.tls_cert, e.tls_key, e.client_ca)


def build_metrics_guard(
    config: SchedulerConfig, fake_cluster_file: Path | None
) -> MetricsGuard | None:
    return metrics_guard(config.metrics.secure, config.kubeconfig, fake_cluster_file)


def build_listeners(
    config: SchedulerConfig,
    webhook: FastAPI,
    extender: Routes,
    metrics: FastAPI,
    explain: FastAPI,
    webhook_tls: WebhookTls | None,
    extender_tls: ssl.SSLContext | None,
) -> list[Listener]:
    e, m, x = config.extender, config.metrics, config.explain
    webhook_context = webhook_tls.context if webhook_tls else None
    return [
        Listener("webhook", webhook, config.listen_address, config.listen_port, webhook_context),
        Listener("extender", extender, e.address, e.port, extender_tls),
        Listener("metrics", metrics, m.address, m.port, metrics_tls(m.secure)),
        Listener("explain", explain, x.address, x.port),
    ]


@dataclass(frozen=True, slots=True)
class Lifetime:
    """What runs around the listeners: once before they serve, once after they stop."""

    runtime: SchedulerRuntime
    events: EventQueue
    certs: WebhookCerts | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        self.events.start()
        self.runtime.start()
        if self.certs is not None:
            name = "vgpu-webhook-certs"
            threading.Thread(
                target=self.certs.run, args=(self._stopping,), name=name, daemon=True
            ).start()

    def stop(self) -> None:
        self._stopping.set()
        self.runtime.stop()
        self.events.stop()


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
    leader_check = providers.Callable(_leader_check, backend)
    fence = providers.Singleton(Fence, leader_check)
    pod_writer = providers.Singleton(PodWriter, backend.provided.port, vendor, fence)
    revoker = providers.Singleton(Revoker, pod_writer, vendor)
    events = providers.Singleton(EventQueue, backend.provided.port, leader_check)
    book = providers.Singleton(OccupancyBook, state)
    late_grants = providers.Singleton(LateGrants, revoker, events, fence)
    follower = providers.Singleton(
        ClusterFollower, state, vendor, memory_factor, clock, trust, book, late_grants
    )
    recorder = providers.Singleton(OccupancyRecorder, backend.provided.port, book, fence)
    takeover_report = providers.Singleton(TakeoverReport, book, fence)
    chores = providers.Callable(build_chores, recorder, late_grants, takeover_report)
    handshake = providers.Singleton(
        build_handshake, config, fake_cluster_file, backend, state, follower, leader_check
    )
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
        handshake=handshake,
        handshake_period=config.provided.handshake_period,
        chores=chores,
    )
    explanations = providers.Singleton(ExplanationStore, state.provided.snapshot_views)
    shapes = providers.Singleton(
        ShapeWindow,
        config.provided.fragmentation,
        vendor,
        providers.Callable(lambda c: c.scheduling().policies.fragmentation, config),
    )
    scheduling = providers.Singleton(
        lambda c, w, s: c.scheduling(w.current, s.card_counts), config, shapes, state
    )
    verb_context = providers.Singleton(
        VerbContext,
        cluster=backend.provided.port,
        state=state,
        config=config,
        scheduling=scheduling,
        trust=trust,
        writer=pod_writer,
        revoker=revoker,
        events=events,
        fence=fence,
        pod_locks=providers.Singleton(PodLocks),
        clock=clock,
        recorder=recorder,
        explanations=explanations,
    )
    service = providers.Singleton(
        SchedulerService,
        verb_context,
        providers.Singleton(FilterVerb, verb_context),
        providers.Singleton(BindVerb, verb_context),
        remember_pod=backend.provided.remember_pod,
        shapes=shapes,
    )
    metrics = providers.Singleton(
        build_metrics, config, state, runtime.provided.is_leader, events, book
    )
    dra_admission = providers.Singleton(build_dra_admission, config, fake_cluster_file)
    webhook_app = providers.Singleton(
        http.webhook_app, service, metrics, runtime.provided.readiness, dra=dra_admission
    )
    preempter = providers.Singleton(
        Preempter,
        state=state,
        scheduling=scheduling,
        pods_on=backend.provided.port.list_pods,
    )
    extender_app = providers.Singleton(
        http.extender_app,
        service,
        metrics,
        config.provided.extender.workers,
        preempter=preempter,
        state_lock=state.provided.locked_if_free,
    )
    metrics_guard = providers.Singleton(build_metrics_guard, config, fake_cluster_file)
    metrics_app = providers.Singleton(http.metrics_app, metrics, metrics_guard)
    explain_app = providers.Singleton(http.explain_app, explanations)
    webhook_tls_setup = providers.Singleton(build_webhook_tls, config, backend.provider)
    webhook_tls = providers.Callable(lambda setup: setup.tls, webhook_tls_setup)
    extender_tls = providers.Singleton(build_extender_tls, config)
    listeners = providers.Singleton(
        build_listeners,
        config,
        webhook_app,
        extender_app,
        metrics_app,
        explain_app,
        webhook_tls,
        extender_tls,
    )
    lifetime = providers.Singleton(Lifetime, runtime, events, webhook_tls_setup.provided.certs)
