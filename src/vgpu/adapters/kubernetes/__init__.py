"""Kubernetes API adapter (official client): implements ClusterPort, plus Lease leader election.

client = new_api_client(ConnectionSettings(kubeconfig="~/.kube/config"))
cluster = KubernetesCluster(client)
cluster.start()
cluster.wait_synced(30)
elector = LeaderElector(client, identity="replica-a", namespace="kube-system")
elector.start()
"""

from vgpu.adapters.kubernetes.cluster import KubernetesCluster
from vgpu.adapters.kubernetes.connection import ConnectionSettings, new_api_client
from vgpu.adapters.kubernetes.leader import LeaderElector

__all__ = ["ConnectionSettings", "KubernetesCluster", "LeaderElector", "new_api_client"]
