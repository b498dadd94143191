"""The monitor's composition root: which adapters, wired to which use cases."""

from collections.abc import Callable, Sequence

from dependency_injector import containers, providers

from vgpu.app.metrics_guard import MetricsGuard
from vgpu.app.monitor.config import MonitorConfig
from vgpu.app.monitor.daemon import MonitorDaemon
from vgpu.app.monitor.http import MonitorReadiness, monitor_routes
from vgpu.app.monitor.metrics import MonitorMetrics, MonitorSources
from vgpu.app.node_agent import fake_node_cluster, make_gpu_port
from vgpu.app.plain_http import PlainHttpServer
from vgpu.app.secure_metrics import metrics_guard, metrics_tls
from vgpu.domain.pod import Pod
from vgpu.domain.vendor import Vendor
from vgpu.ports.accounting import AccountingPort
from vgpu.ports.cluster import ClusterPort


def make_accounting(config: MonitorConfig) -> AccountingPort:
    """The cache files under `host_dir` and `claims_dir`, mapped writable only when feedback
    must write."""
    from vgpu.adapters.hamicore import HamiCoreRegions

    return HamiCoreRegions(
        config.host_dir, writable=config.priority_feedback, claims_root=config.claims_dir
    )


def make_cluster(config: MonitorConfig) -> ClusterPort:
    """The API, watching only the pods bound to this node (an informer, as HAMi's monitor);
    with `fake_cluster`, the cluster that file describes, in memory."""
    if config.fake_cluster is not None:
        return fake_node_cluster(config.fake_cluster, config.node_name, Vendor())
    from vgpu.adapters.kubernetes import ConnectionSettings, KubernetesCluster

    settings = ConnectionSettings(
        kubeconfig=str(config.kubeconfig) if config.kubeconfig is not None else None
    )
    cluster = KubernetesCluster.connect(
        settings,
        component="vgpu-monitor",
        pod_field_selector=f"spec.nodeName={config.node_name}",
        watch_nodes=False,
        watch_quotas=False,
    )
    cluster.start()
    return cluster


def make_server(
    config: MonitorConfig,
    metrics: MonitorMetrics,
    readiness: MonitorReadiness,
    guard: MetricsGuard | None,
) -> PlainHttpServer:
    """The metrics port; HTTPS, and /metrics for allowed tokens only, with secure metrics."""
    routes = monitor_routes(metrics.render, readiness, guard)
    tls = metrics_tls(config.secure_metrics)
    return PlainHttpServer(config.listen_host, config.listen_port, routes, "metrics-http", tls)


def pods_on_node(cluster: ClusterPort, node: str) -> Callable[[], Sequence[Pod]]:
    return lambda: cluster.list_pods(node)


class MonitorContainer(containers.DeclarativeContainer):
    """Override `cluster`, `gpu_port`, `accounting` or `guard` to embed or test with other
    adapters."""

    config = providers.Dependency(instance_of=MonitorConfig)

    cluster = providers.Singleton(make_cluster, config)
    gpu_port = providers.Singleton(make_gpu_port, config)
    accounting = providers.Singleton(make_accounting, config)

    pods = providers.Singleton(pods_on_node, cluster, config.provided.node_name)
    metrics = providers.Singleton(
        MonitorMetrics,
        providers.Singleton(MonitorSources, config.provided.node_name, gpu_port, accounting, pods),
        config.provided.legacy_metrics,
    )
    readiness = providers.Singleton(MonitorReadiness)
    guard = providers.Singleton(
        metrics_guard,
        config.provided.secure_metrics,
        config.provided.kubeconfig,
        config.provided.fake_cluster,
    )
    server = providers.Singleton(make_server, config, metrics, readiness, guard)
    daemon = providers.Singleton(
        MonitorDaemon,
        accounting,
        pods,
        interval=config.provided.interval,
        cleanup_grace=config.provided.cleanup_grace,
        priority_feedback=config.provided.priority_feedback,
    )
