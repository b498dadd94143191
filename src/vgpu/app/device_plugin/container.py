"""The device plugin's composition root: which adapters, wired to which use cases."""

import logging

from dependency_injector import containers, providers

from vgpu import __version__
from vgpu.adapters.kubelet import KubeletPlugin
from vgpu.app.device_plugin.allocator import Allocator
from vgpu.app.device_plugin.config import DevicePluginConfig
from vgpu.app.device_plugin.daemon import DevicePluginDaemon
from vgpu.app.device_plugin.gpustate import GpuState
from vgpu.app.device_plugin.health import HealthWatcher
from vgpu.app.device_plugin.hostdirs import HostDirs
from vgpu.app.device_plugin.nodeconfig import NodeSettings, node_settings
from vgpu.app.device_plugin.registrar import NodeRegistrar
from vgpu.app.device_plugin.service import DevicePluginService
from vgpu.app.device_plugin.session import KubeletSession
from vgpu.domain.allocation import AllocationConfig
from vgpu.domain.vendor import Vendor
from vgpu.ports.cluster import ClusterPort
from vgpu.ports.gpu import GpuPort
from vgpu.ports.kubelet import PluginOptions

log = logging.getLogger(__name__)


def make_gpu_port(config: DevicePluginConfig) -> GpuPort:
    """The fake inventory when `fake_gpus` names a file, else NVML."""
    if config.fake_gpus is not None:
        from vgpu.adapters.fake.gpus import FakeGpus

        return FakeGpus.from_file(config.fake_gpus)
    from vgpu.adapters.nvml import NvmlGpus

    return NvmlGpus()


def make_cluster(config: DevicePluginConfig) -> ClusterPort:
    """The Kubernetes API, read live (no informers): the plugin reads little and must not lag."""
    from vgpu.adapters.kubernetes import ConnectionSettings, KubernetesCluster

    settings = ConnectionSettings(
        kubeconfig=str(config.kubeconfig) if config.kubeconfig is not None else None
    )
    return KubernetesCluster.connect(
        settings,
        component="vgpu-device-plugin",
        pod_field_selector=f"spec.nodeName={config.node_name}",
        watch_quotas=False,
    )


def make_vendor(config: DevicePluginConfig) -> Vendor:
    return Vendor(word=config.vendor_word, count_resource=config.resource_name)


def discover(port: GpuPort, settings: NodeSettings, numa_topology: bool) -> GpuState:
    """The GPUs this plugin serves: NVML's (or the fake's) minus the node config's filters."""
    kept = []
    for gpu in port.discover():
        if settings.keeps(gpu):
            log.info(
                "GPU %d %s: %s, %d MiB, NUMA %d%s",
                gpu.index,
                gpu.uuid,
                gpu.name,
                gpu.memory_mib,
                gpu.numa,
                ", MIG on" if gpu.mig_enabled else "",
            )
            kept.append(gpu)
        else:
            log.info("GPU %d %s: filtered out by the node config", gpu.index, gpu.uuid)
    return GpuState(kept, settings.sharing, numa_topology)


def allocation_config(config: DevicePluginConfig, settings: NodeSettings) -> AllocationConfig:
    return AllocationConfig(
        hook_path=config.hook_path,
        memory_scaling=settings.sharing.memory_scaling,
        disable_core_limit=config.disable_core_limit,
        cuda_log_level=settings.cuda_log_level,
        disable_control_namespaces=frozenset(config.disable_control_namespaces),
    )


def plugin_options(settings: NodeSettings) -> PluginOptions:
    return PluginOptions(get_preferred_allocation_available=settings.preferred_allocation)


class DevicePluginContainer(containers.DeclarativeContainer):
    """Override `cluster`, `gpu_port` or `kubelet` to embed or test with other adapters."""

    config = providers.Dependency(instance_of=DevicePluginConfig)

    cluster = providers.Singleton(make_cluster, config)
    gpu_port = providers.Singleton(make_gpu_port, config)
    kubelet = providers.Singleton(
        KubeletPlugin, config.provided.plugin_dir, config.provided.socket_name
    )

    settings = providers.Singleton(node_settings, config)
    vendor = providers.Singleton(make_vendor, config)
    gpus = providers.Singleton(discover, gpu_port, settings, config.provided.numa_topology)
    host = providers.Singleton(
        HostDirs, config.provided.hook_path, config.provided.lock_dir, __version__
    )
    allocator = providers.Singleton(
        Allocator,
        cluster,
        gpus,
        config.provided.node_name,
        providers.Singleton(allocation_config, config, settings),
        host,
        vendor,
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
    )
    health = providers.Singleton(HealthWatcher, gpu_port, gpus)
    daemon = providers.Singleton(
        DevicePluginDaemon, session, registrar, health, gpu_port, config.provided.kubelet_poll
    )
