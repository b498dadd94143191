"""The DRA driver's composition root: which adapters, wired to which use cases."""

import logging

from dependency_injector import containers, providers

from vgpu import __version__
from vgpu.adapters.hostfile import (
    CdiSpecFiles,
    ClaimDirs,
    JsonServedRecord,
    PreparedStore,
    StaticCdiCatalog,
)
from vgpu.adapters.kubelet import KubeletCheckpoint
from vgpu.adapters.kubelet_dra import DraKubeletPlugin
from vgpu.app.device_plugin.health import HealthWatcher
from vgpu.app.device_plugin.hostdirs import HostDirs
from vgpu.app.dra_driver.config import DraDriverConfig
from vgpu.app.dra_driver.daemon import DraDriverDaemon
from vgpu.app.dra_driver.gpus import discover_gpus
from vgpu.app.dra_driver.ledger import DraNodeLedger
from vgpu.app.dra_driver.prepare import ClaimPreparer, GpuVisibility
from vgpu.app.dra_driver.prepared import PreparedClaims
from vgpu.app.dra_driver.service import DraDriverService
from vgpu.app.dra_driver.slices import SlicePublisher
from vgpu.app.dra_driver.sweeper import ClaimSweeper
from vgpu.app.fake_mode import load_fake_dra
from vgpu.app.node_agent import connection_settings, fake_node_cluster, make_gpu_port
from vgpu.domain.dra import HamiCoreSetup
from vgpu.domain.vendor import Vendor
from vgpu.ports.cluster import ClusterPort
from vgpu.ports.dra import DraApiPort

log = logging.getLogger(__name__)


def make_cluster(config: DraDriverConfig) -> ClusterPort:
    """The node's pods from a watch cache (the ledger asks which still run); with
    `fake_cluster`, the cluster that file describes, in memory."""
    vendor = Vendor(count_resource=config.resource_name)
    if config.fake_cluster is not None:
        return fake_node_cluster(config.fake_cluster, config.node_name, vendor)
    from vgpu.adapters.kubernetes import KubernetesCluster

    cluster = KubernetesCluster.connect(
        connection_settings(config),
        component="vgpu-dra-driver",
        pod_field_selector=f"spec.nodeName={config.node_name}",
        node_field_selector=f"metadata.name={config.node_name}",
        watch_nodes=False,
        watch_quotas=False,
    )
    cluster.start()
    return cluster


def make_dra_api(config: DraDriverConfig) -> DraApiPort:
    """`resource.k8s.io/v1` on the API server; with `fake_cluster`, in memory, starting with
    the claims and pods that file lists."""
    if config.fake_cluster is not None:
        log.info("fake cluster: ResourceSlices and ResourceClaims are kept in memory")
        return load_fake_dra(config.fake_cluster, with_pods=True)
    from vgpu.adapters.kubernetes.dra import KubernetesDraApi

    return KubernetesDraApi.connect(connection_settings(config))


def hami_core_setup(config: DraDriverConfig) -> HamiCoreSetup:
    host = HostDirs(config.hook_path, config.lock_dir, __version__)
    return HamiCoreSetup(
        hook_path=config.hook_path,
        libvgpu_host_path=host.libvgpu_host_path(),
        lock_dir=config.lock_dir,
        license_present=host.license_present(),
        disable_core_limit=config.disable_core_limit,
        cuda_log_level=config.cuda_log_level,
        kind=config.cdi_kind,
    )


class DraDriverContainer(containers.DeclarativeContainer):
    """Override `gpu_port`, `cluster`, `dra_api`, `kubelet`, `cdi_specs`, `claim_dirs` or
    `prepared_store` to embed or test with other adapters (`fake_cluster` and `fake_gpus` in
    the settings choose the fakes)."""

    config = providers.Dependency(instance_of=DraDriverConfig)

    gpu_port = providers.Singleton(make_gpu_port, config)
    cluster = providers.Singleton(make_cluster, config)
    dra_api = providers.Singleton(make_dra_api, config)
    kubelet = providers.Singleton(
        DraKubeletPlugin,
        config.provided.driver_name,
        config.provided.registry_dir,
        config.provided.plugin_path,
    )
    cdi_specs = providers.Singleton(
        CdiSpecFiles, config.provided.cdi_dir, config.provided.cdi_kind
    )
    cdi_catalog = providers.Singleton(StaticCdiCatalog, config.provided.static_cdi_dirs)
    claim_dirs = providers.Singleton(
        ClaimDirs, config.provided.hook_path, config.provided.lock_dir
    )
    prepared_store = providers.Singleton(PreparedStore, config.provided.state_dir)
    served_store = providers.Singleton(JsonServedRecord, config.provided.state_dir)
    kubelet_checkpoint = providers.Singleton(
        KubeletCheckpoint, config.provided.device_plugin_dir
    )

    gpus = providers.Singleton(discover_gpus, gpu_port, config.provided.node_name)
    prepared = providers.Singleton(
        PreparedClaims, prepared_store, config.provided.node_name, config.provided.driver_name
    )
    ledger = providers.Singleton(
        DraNodeLedger,
        prepared,
        gpus,
        cluster,
        served_store,
        kubelet_checkpoint,
        config.provided.resource_name,
    )
    preparer = providers.Singleton(
        ClaimPreparer,
        dra_api,
        gpus,
        ledger,
        prepared,
        cdi_specs,
        claim_dirs,
        providers.Singleton(
            GpuVisibility,
            cdi_catalog,
            config.provided.gpu_visibility,
            config.provided.nvidia_cdi_kind,
        ),
        providers.Singleton(hami_core_setup, config),
        config.provided.driver_name,
    )
    service = providers.Singleton(
        DraDriverService, preparer, gpus, config.provided.driver_name
    )
    publisher = providers.Singleton(
        SlicePublisher,
        dra_api,
        gpus,
        config.provided.driver_name,
        config.provided.resync_interval,
        config.provided.publish_retry,
    )
    sweeper = providers.Singleton(
        ClaimSweeper,
        dra_api,
        cluster,
        config.provided.node_name,
        prepared,
        preparer,
        config.provided.sweep_interval,
    )
    daemon = providers.Singleton(
        DraDriverDaemon,
        kubelet,
        service,
        preparer,
        publisher,
        providers.Singleton(HealthWatcher, gpu_port, gpus),
        sweeper,
        gpus,
        gpu_port,
        config.provided.socket_check_interval,
    )
