"""Kubernetes API adapter (official client): implements ClusterPort, plus Lease leader election.

client = new_api_client(ConnectionSettings(kubeconfig="~/.kube/config"))
cluster = KubernetesCluster(client)
cluster.start()
cluster.wait_synced(30)
elector = LeaderElector(client, identity="replica-a", namespace="kube-system")
elector.start()
keys = SecretGrantKeys(client, "vgpu-system", "vgpu-grant-keys")   # the grant-signing key ring
dra = KubernetesDraReader(client)          # resource.k8s.io/v1 objects, read as JSON
templates = KubernetesClaimTemplates(client)   # the webhook's ResourceClaimTemplates
"""

from vgpu.adapters.kubernetes.cluster import KubernetesCluster
from vgpu.adapters.kubernetes.connection import ConnectionSettings, new_api_client
from vgpu.adapters.kubernetes.dra import KubernetesClaimTemplates
from vgpu.adapters.kubernetes.dra_reader import KubernetesDraReader
from vgpu.adapters.kubernetes.keys import SecretGrantKeys
from vgpu.adapters.kubernetes.leader import LeaderElector
from vgpu.adapters.kubernetes.webhook_tls import KubernetesWebhookTLS

__all__ = [
    "ConnectionSettings",
    "KubernetesClaimTemplates",
    "KubernetesCluster",
    "KubernetesDraReader",
    "KubernetesWebhookTLS",
    "LeaderElector",
    "SecretGrantKeys",
    "new_api_client",
]
