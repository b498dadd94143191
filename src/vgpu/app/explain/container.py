"""The composition root of `vgpu explain`: config -> cluster (the file's, or the API read once)
-> the scheduler's state and follower -> the inquiry; for pods with DRA claims the DRA
objects (the file's, or the API's) -> the DRA inquiry.

Tests and embedders override `cluster` (a Resource: `shutdown_resources` lets it go).
"""

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dependency_injector import containers, providers

from vgpu.app.explain.dra_inquiry import DraInquiry
from vgpu.app.explain.inquiry import Inquiry
from vgpu.app.fake_mode import load_fake_cluster, load_fake_dra
from vgpu.app.scheduler.config import SchedulerConfig
from vgpu.app.scheduler.follower import ClusterFollower
from vgpu.app.scheduler.shapes import ShapeWindow
from vgpu.app.scheduler.state import SchedulerState
from vgpu.app.scheduler.trust import GrantTrust
from vgpu.domain.fragmentation.cards import CardWorkload
from vgpu.ports.cluster import ClusterPort
from vgpu.ports.dra import DraReadPort


def open_cluster(config: SchedulerConfig, fake_cluster_file: Path | None) -> Iterator[ClusterPort]:
    """The fake cluster the file describes, or the API through a cache that is never started:
    without its watchers every read goes to the API once, which is all one run needs."""
    if fake_cluster_file is not None:
        yield load_fake_cluster(fake_cluster_file, config.vendor())
        return
    from vgpu.adapters.kubernetes import KubernetesCluster  # the client is heavy; load on use

    cluster = KubernetesCluster(_api_client(config), component="vgpu-explain", owns_client=True)
    try:
        yield cluster
    finally:
        cluster.stop()


def open_dra(config: SchedulerConfig, fake_cluster_file: Path | None) -> Iterator[DraReadPort]:
    """The DRA objects the fake cluster file lists, or the API's (its own connection)."""
    if fake_cluster_file is not None:
        yield load_fake_dra(fake_cluster_file)
        return
    from vgpu.adapters.kubernetes import KubernetesDraReader

    client = _api_client(config)
    try:
        yield KubernetesDraReader(client)
    finally:
        client.close()


def _api_client(config: SchedulerConfig) -> Any:
    from vgpu.adapters.kubernetes import ConnectionSettings, new_api_client

    kubeconfig = str(config.kubeconfig) if config.kubeconfig is not None else None
    return new_api_client(ConnectionSettings(kubeconfig=kubeconfig))


def believe_named_grants(config: SchedulerConfig) -> GrantTrust:
    """Grants on pods that name the scheduler, signed or not: no key ring is read."""
    return GrantTrust(config.vendor(), config.scheduler_name, ring=None)


def given_shapes(config: SchedulerConfig) -> Callable[[], CardWorkload] | None:
    """The typical shapes FGD weighs, where the settings give them. Otherwise the scheduler
    learns them from the pods it has seen lately, which one run of explain cannot know: the
    pod's own shape stands in for them."""
    if not config.fragmentation.given_shapes():
        return None
    return ShapeWindow(config.fragmentation, config.vendor(), announce=False).current


class ExplainContainer(containers.DeclarativeContainer):
    """Wiring for one `vgpu explain` run."""

    config = providers.Dependency(instance_of=SchedulerConfig)
    fake_cluster_file: providers.Object[Path | None] = providers.Object(None)

    cluster = providers.Resource(open_cluster, config, fake_cluster_file)
    state = providers.Singleton(SchedulerState)
    follower = providers.Singleton(
        ClusterFollower,
        state,
        providers.Callable(lambda c: c.vendor(), config),
        config.provided.defaults.memory_factor,
        providers.Object(time.time),
        providers.Singleton(believe_named_grants, config),
    )
    dra = providers.Resource(open_dra, config, fake_cluster_file)
    dra_inquiry = providers.Singleton(DraInquiry, dra, cluster)
    inquiry = providers.Singleton(
        Inquiry,
        cluster,
        state,
        follower,
        providers.Callable(
            lambda c, s: c.scheduling(given_shapes(c), s.card_counts), config, state
        ),
        dra_inquiry.provider,
    )
