"""The device plugin's composition root: which adapters, wired to which use cases."""

import logging
from collections.abc import Callable

from dependency_injector import containers, providers

from vgpu import __version__
from vgpu.adapters.hostfile import JsonServedRecord
from vgpu.adapters.kubelet import KubeletCheckpoint, KubeletPlugin
from vgpu.app.device_plugin.allocate_patch import AllocatePatch
from vgpu.app.device_plugin.allocator import Allocator
from vgpu.app.device_plugin.bind_phase import BindPhase
from vgpu.app.device_plugin.config import DevicePluginConfig
from vgpu.app.device_plugin.daemon import DevicePluginDaemon
from vgpu.app.device_plugin.discovery import discover
from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.hamicore_answer import HamiCoreAnswers
from vgpu.app.device_plugin.health import HealthWatcher
from vgpu.app.device_plugin.hostdirs import HostDirs
from vgpu.app.device_plugin.keeper import OccupancyKeeper
from vgpu.app.device_plugin.keyring import KeyRingCache
from vgpu.app.device_plugin.kubeletholders import KubeletHolders
from vgpu.app.device_plugin.mig_serving import MigServing
from vgpu.app.device_plugin.migmanager import MigManager
from vgpu.app.device_plugin.nodeconfig import NodeSettings, node_settings
from vgpu.app.device_plugin.nodeledger import NodeLedger
from vgpu.app.device_plugin.pod_search import PodSearch
from vgpu.app.device_plugin.probes import PluginProbes
from vgpu.app.device_plugin.registrar import NodeRegistrar
from vgpu.app.device_plugin.segments import Segments
from vgpu.app.device_plugin.served import ServedRecord
from vgpu.app.device_plugin.served_recorder import ServedRecorder
from vgpu.app.device_plugin.service import DevicePluginService
from vgpu.app.device_plugin.session import KubeletSession
from vgpu.app.device_plugin.topology import TopologyScores
from vgpu.app.device_plugin.trust import NodeGrantTrust
from vgpu.app.fake_mode import fake_grant_keys
from vgpu.app.node_agent import connection_settings, fake_node_cluster, make_gpu_port
from vgpu.app.plain_http import PlainHttpServer, probe_route
from vgpu.app.settings import host_and_port
from vgpu.domain.allocation import AllocationConfig
from vgpu.domain.trust import NamedSchedulers, Signatures
from vgpu.domain.vendor import Vendor
from vgpu.ports.cluster import ClusterPort
from vgpu.ports.gpu import GpuPort, MigPort
from vgpu.ports.keys import GrantKeyPort
from vgpu.ports.kubelet import PluginOptions

log = logging.getLogger(__name__)


def make_cluster(config: DevicePluginConfig, vendor: Vendor) -> ClusterPort:
    """The Kubernetes API with a watch cache of this node's pods, which the node ledger and
    the pending-pod search read on every Allocate; reads go to the API until it has synced.
    With `fake_cluster`, the cluster that file describes, in memory."""
    if config.fake_cluster is not None:
        return fake_node_cluster(config.fake_cluster, config.node_name, vendor)
    from vgpu.adapters.kubernetes import KubernetesCluster

    cluster = KubernetesCluster.connect(
        connection_settings(config),
        component="vgpu-device-plugin",
        pod_field_selector=f"spec.nodeName={config.node_name}",
        node_field_selector=f"metadata.name={config.node_name}",
        watch_quotas=False,
    )
    cluster.start()
    return cluster


def make_grant_keys(
    config: DevicePluginConfig, cluster: ClusterPort, vendor: Vendor
) -> GrantKeyPort:
    """The Secret holding the grant key ring. With `fake_cluster`, a fresh ring in memory that
    has signed the grants the file's pods carry, as the fake-cluster scheduler does: the file
    describes a trusted cluster."""
    if config.fake_cluster is not None:
        return fake_grant_keys(cluster, vendor)
    from vgpu.adapters.kubernetes.connection import new_api_client
    from vgpu.adapters.kubernetes.keys import SecretGrantKeys

    signing = config.signing
    return SecretGrantKeys(
        new_api_client(connection_settings(config)), signing.secret_namespace, signing.secret_name
    )


def make_trust(
    config: DevicePluginConfig, vendor: Vendor, keys: Callable[[], GrantKeyPort]
) -> NodeGrantTrust:
    """Signed grants when signing is on (and, taking over from HAMi, unsigned ones on pods
    HAMi's scheduler placed); else grants on pods naming a trusted scheduler."""
    signing = config.signing
    hami = frozenset(config.takeover.hami_scheduler_names if config.takeover.from_hami else ())
    if not signing.enabled:
        rule = NamedSchedulers(frozenset(signing.trusted_schedulers) | hami)
        trust = NodeGrantTrust(rule, config.node_name, vendor)
        log.warning("serving %s", trust.describe())
        return trust
    ring = KeyRingCache(
        keys(),
        f"Secret {signing.secret_namespace}/{signing.secret_name}",
        refresh_s=signing.refresh_interval,
        unknown_key_retry_s=signing.unknown_key_retry,
    )
    trust = NodeGrantTrust(Signatures(ring, unsigned_from=hami), config.node_name, vendor)
    log.info("serving %s", trust.describe())
    return trust


def make_vendor(config: DevicePluginConfig) -> Vendor:
    return Vendor(word=config.vendor_word, count_resource=config.resource_name)


def make_mig_manager(
    config: DevicePluginConfig,
    port: GpuPort,
    cluster: ClusterPort,
    gpus: GpuState,
    trust: NodeGrantTrust,
    served: ServedRecord,
) -> MigManager | None:
    """The MIG instance manager, where the GPU port can make instances."""
    if not isinstance(port, MigPort):
        return None
    interval = config.mig_reconcile_interval
    return MigManager(port, cluster, config.node_name, gpus, trust, served, interval)


def allocation_config(config: DevicePluginConfig, settings: NodeSettings) -> AllocationConfig:
    return AllocationConfig(
        hook_path=config.hook_path,
        memory_scaling=settings.sharing.memory_scaling,
        disable_core_limit=config.disable_core_limit,
        cuda_log_level=settings.cuda_log_level,
        disable_control_namespaces=frozenset(config.disable_control_namespaces),
    )


def make_topology(config: DevicePluginConfig, port: GpuPort) -> TopologyScores | None:
    """Pair scores for hami.io/node-nvidia-score when `topology_score` is on."""
    return TopologyScores(port) if config.topology_score else None


def make_probe_server(config: DevicePluginConfig, probes: PluginProbes) -> PlainHttpServer | None:
    """`/healthz` and `/readyz` on `health_listen`; None when it is empty."""
    if not config.health_listen:
        return None
    host, port = host_and_port(config.health_listen)
    routes = {"/healthz": probe_route(probes.liveness), "/readyz": probe_route(probes.readiness)}
    return PlainHttpServer(host, port, routes, "plugin-health")


def plugin_options(settings: NodeSettings) -> PluginOptions:
    return PluginOptions(get_preferred_allocation_available=settings.preferred_allocation)


class DevicePluginContainer(containers.DeclarativeContainer):
    """Override `cluster`, `gpu_port`, `grant_keys`, `kubelet`, `kubelet_checkpoint` or
    `served_store` to embed or test with other adapters (`fake_cluster` and `fake_gpus` in the
    settings choose the fakes)."""

    config = providers.Dependency(instance_of=DevicePluginConfig)

    vendor = providers.Singleton(make_vendor, config)
    cluster = providers.Singleton(make_cluster, config, vendor)
    grant_keys = providers.Singleton(make_grant_keys, config, cluster, vendor)
    gpu_port = providers.Singleton(make_gpu_port, config)
    kubelet = providers.Singleton(
        KubeletPlugin, config.provided.plugin_dir, config.provided.socket_name
    )
    kubelet_checkpoint = providers.Singleton(KubeletCheckpoint, config.provided.plugin_dir)
    served_store = providers.Singleton(JsonServedRecord, config.provided.state_dir)

    settings = providers.Singleton(node_settings, config)
    gpus = providers.Singleton(
        discover,
        gpu_port,
        settings,
        config.provided.numa_topology,
        config.provided.mig_allowlist,
    )
    trust = providers.Singleton(make_trust, config, vendor, grant_keys.provider)
    host = providers.Singleton(
        HostDirs, config.provided.hook_path, config.provided.lock_dir, __version__
    )
    served = providers.Singleton(ServedRecord, served_store, config.provided.node_name)
    mig = providers.Singleton(make_mig_manager, config, gpu_port, cluster, gpus, trust, served)
    ledger = providers.Singleton(
        NodeLedger,
        cluster,
        gpus,
        config.provided.node_name,
        vendor,
        trust,
        served,
        providers.Singleton(
            KubeletHolders, kubelet_checkpoint, gpus, config.provided.resource_name
        ),
    )
    allocator = providers.Singleton(
        Allocator,
        vendor,
        providers.Singleton(
            PodSearch,
            cluster,
            config.provided.node_name,
            vendor,
            trust,
            settle_s=config.provided.settle,
        ),
        ledger,
        providers.Singleton(Segments, gpus, vendor),
        providers.Singleton(
            HamiCoreAnswers,
            providers.Singleton(allocation_config, config, settings),
            host,
            vendor,
        ),
        providers.Singleton(MigServing, gpus, mig),
        providers.Singleton(ServedRecorder, served, trust),
        providers.Singleton(AllocatePatch, cluster, vendor),
        providers.Singleton(BindPhase, cluster, config.provided.node_name),
    )
    service = providers.Singleton(
        DevicePluginService, gpus, allocator, settings.provided.preferred_allocation
    )
    session = providers.Singleton(
        KubeletSession,
        kubelet,
        service,
        config.provided.resource_name,
        providers.Singleton(plugin_options, settings),
        config.provided.register_retry,
    )
    registrar = providers.Singleton(
        NodeRegistrar,
        cluster,
        gpus,
        config.provided.node_name,
        vendor,
        config.provided.register_interval,
        config.provided.register_retry,
        report_handshake=config.provided.report_handshake,
        topology=providers.Singleton(make_topology, config, gpu_port),
    )
    health = providers.Singleton(HealthWatcher, gpu_port, gpus)
    keeper = providers.Singleton(
        OccupancyKeeper,
        cluster,
        config.provided.node_name,
        ledger,
        served,
        trust,
        config.provided.occupancy_check_interval,
    )
    probes = providers.Singleton(PluginProbes, config.provided.liveness_stall)
    probe_server = providers.Singleton(make_probe_server, config, probes)
    daemon = providers.Singleton(
        DevicePluginDaemon,
        session,
        registrar,
        health,
        gpu_port,
        keeper,
        probes,
        config.provided.kubelet_poll,
        mig=mig,
    )
