"""The Kubernetes side of the wiring: the cached cluster adapter, the Lease elector, and the
DRA webhook's reads and templates."""

import socket

from vgpu.adapters.kubernetes import (
    ConnectionSettings,
    KubernetesClaimTemplates,
    KubernetesCluster,
    KubernetesDraReader,
    KubernetesWebhookTLS,
    LeaderElector,
    SecretGrantKeys,
    new_api_client,
)
from vgpu.app.scheduler.config import SchedulerConfig
from vgpu.app.scheduler.runtime import Leadership, Lifecycle
from vgpu.ports.cluster import ClusterPort
from vgpu.ports.dra import ClaimTemplatePort, DraReadPort
from vgpu.ports.keys import GrantKeyPort
from vgpu.ports.webhook_tls import WebhookTLSPort


def kubernetes_backend(
    config: SchedulerConfig,
) -> tuple[ClusterPort, Lifecycle, Leadership | None, GrantKeyPort, WebhookTLSPort | None]:
    """Connect with `config.kubeconfig` (else in-cluster or the default kubeconfig).

    Every API call times out after `config.api_timeout()` (below the renew deadline).
    Raises ClusterError when the client cannot be configured.
    """
    kubeconfig = str(config.kubeconfig) if config.kubeconfig is not None else None
    client = new_api_client(ConnectionSettings(kubeconfig=kubeconfig))
    timeout = config.api_timeout()
    cluster = KubernetesCluster(
        client, component=config.scheduler_name, owns_client=True, request_timeout_s=timeout
    )
    keys = SecretGrantKeys(
        client, config.signing.secret_namespace, config.signing.secret_name, timeout=timeout
    )
    certs = config.webhook_tls
    tls_store = (
        None
        if certs is None
        else KubernetesWebhookTLS(
            client,
            namespace=certs.secret_namespace,
            secret_name=certs.secret_name,
            webhook_name=certs.webhook_name,
        )
    )
    election = config.leader_election
    if not election.enabled:
        return cluster, cluster, None, keys, tls_store
    elector = LeaderElector(
        client,
        identity=election.identity or socket.gethostname(),
        name=election.lease_name or config.scheduler_name,
        namespace=election.namespace,
        lease_duration_s=election.lease_duration,
        renew_deadline_s=election.renew_deadline,
        retry_period_s=election.retry_period,
    )
    return cluster, cluster, elector, keys, tls_store


def kubernetes_dra(config: SchedulerConfig) -> tuple[DraReadPort, ClaimTemplatePort]:
    """The ResourceSlices and ResourceClaimTemplates of the DRA webhook, on their own
    connection, every call timing out after `config.dra.api_timeout`."""
    kubeconfig = str(config.kubeconfig) if config.kubeconfig is not None else None
    client = new_api_client(ConnectionSettings(kubeconfig=kubeconfig))
    timeout = config.dra.api_timeout
    return (
        KubernetesDraReader(client, timeout=timeout),
        KubernetesClaimTemplates(client, timeout=timeout),
    )
