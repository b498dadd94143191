"""The Kubernetes side of the wiring: the cached cluster adapter and the Lease elector."""

import socket

from vgpu.adapters.kubernetes import (
    ConnectionSettings,
    KubernetesCluster,
    LeaderElector,
    new_api_client,
)
from vgpu.app.scheduler.config import SchedulerConfig
from vgpu.app.scheduler.runtime import Leadership, Lifecycle
from vgpu.ports.cluster import ClusterPort


def kubernetes_backend(
    config: SchedulerConfig,
) -> tuple[ClusterPort, Lifecycle, Leadership | None]:
    """Connect with `config.kubeconfig` (else in-cluster or the default kubeconfig).

    Raises ClusterError when the client cannot be configured.
    """
    kubeconfig = str(config.kubeconfig) if config.kubeconfig is not None else None
    client = new_api_client(ConnectionSettings(kubeconfig=kubeconfig))
    cluster = KubernetesCluster(client, component=config.scheduler_name, owns_client=True)
    election = config.leader_election
    if not election.enabled:
        return cluster, cluster, None
    elector = LeaderElector(
        client,
        identity=election.identity or socket.gethostname(),
        name=election.lease_name or config.scheduler_name,
        namespace=election.namespace,
        lease_duration_s=election.lease_duration,
        renew_deadline_s=election.renew_deadline,
        retry_period_s=election.retry_period,
    )
    return cluster, cluster, elector
