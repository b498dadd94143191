"""`resource.k8s.io/v1` over kube-apiserver as plain JSON (`KubeApi`), so the objects' newer
fields (consumable capacity's `requestPolicy`, `shareID`, `consumedCapacity`) pass through
whatever the installed Kubernetes client's models know: DraApiPort (the driver's
ResourceSlices, ResourceClaims and Pods) and ClaimTemplatePort (the webhook's
ResourceClaimTemplates)."""

from collections.abc import Mapping
from typing import Any

from kubernetes.client import ApiClient

from vgpu.adapters.kubernetes.api import KubeApi, namespaced, object_path
from vgpu.adapters.kubernetes.connection import ConnectionSettings, new_api_client
from vgpu.ports.cluster import ClusterError, NotFound

GROUP_VERSION = "apis/resource.k8s.io/v1"
SLICES = f"/{GROUP_VERSION}/resourceslices"


class KubernetesDraApi:
    """Implements DraApiPort. Reads go to the API each time (no cache): a claim is read once
    per Prepare, and a slice list only when the driver publishes."""

    def __init__(self, api_client: ApiClient, *, timeout: float = 10.0) -> None:
        self._api = KubeApi(api_client, timeout=timeout)

    @classmethod
    def connect(cls, settings: ConnectionSettings, **options: Any) -> "KubernetesDraApi":
        return cls(new_api_client(settings), **options)

    def list_slices(self, driver: str, node: str) -> list[dict[str, Any]]:
        selector = f"spec.driver={driver},spec.nodeName={node}"
        listed = self._api.get(SLICES, [("fieldSelector", selector)])
        items = listed.get("items")
        if not isinstance(items, list):
            raise ClusterError(f"GET {SLICES}: the answer has no list of items")
        # a server that ignores the selector (an old or partial one) must not hand us others'
        return [i for i in items if isinstance(i, dict) and _owned(i, driver, node)]

    def create_slice(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        return self._api.post(SLICES, manifest)

    def replace_slice(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        return self._api.put(object_path(SLICES, _name(manifest)), manifest)

    def delete_slice(self, name: str) -> None:
        self._api.delete(object_path(SLICES, name))

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = object_path(namespaced("resourceclaims", namespace, GROUP_VERSION), name)
        return self._get(path)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get(object_path(namespaced("pods", namespace), name))

    def _get(self, path: str) -> dict[str, Any] | None:
        try:
            return self._api.get(path)
        except NotFound:
            return None


class KubernetesClaimTemplates:
    """Implements ClaimTemplatePort: `resourceclaimtemplates` in a namespace, as JSON."""

    def __init__(self, api_client: ApiClient, *, timeout: float = 5.0) -> None:
        self._api = KubeApi(api_client, timeout=timeout)

    def get_claim_template(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = object_path(namespaced("resourceclaimtemplates", namespace, GROUP_VERSION), name)
        try:
            return self._api.get(path)
        except NotFound:
            return None

    def create_claim_template(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        meta = manifest.get("metadata")
        namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
        if not isinstance(namespace, str) or not namespace:
            raise ClusterError("a ResourceClaimTemplate to create needs metadata.namespace")
        return self._api.post(
            namespaced("resourceclaimtemplates", namespace, GROUP_VERSION), manifest
        )


def _owned(item: Mapping[str, Any], driver: str, node: str) -> bool:
    spec = item.get("spec")
    return isinstance(spec, Mapping) and spec.get("driver") == driver and (
        spec.get("nodeName") == node
    )


def _name(manifest: Mapping[str, Any]) -> str:
    meta = manifest.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ClusterError("a ResourceSlice to replace needs metadata.name")
    return name
