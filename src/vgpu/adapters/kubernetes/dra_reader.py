"""DraReadPort over the API: plain-JSON lists of `/apis/resource.k8s.io/v1/...`, page by page,
for `vgpu explain` (a person runs it with their own kubeconfig; no chart component reads these).

A cluster that does not serve `resource.k8s.io/v1` (404) lists nothing; other failures raise
ClusterError as every call does.
"""

from typing import Any

from kubernetes.client import ApiClient

from vgpu.adapters.kubernetes.api import KubeApi
from vgpu.ports.cluster import NotFound

GROUP = "/apis/resource.k8s.io/v1"
PAGE = 500  # objects per list call


class KubernetesDraReader:
    """Reads DRA objects with the official client's connection."""

    def __init__(self, api_client: ApiClient, *, timeout: float = 30.0) -> None:
        self._api = KubeApi(api_client, timeout=timeout)

    def list_resource_claims(self) -> list[dict[str, Any]]:
        return self._list("resourceclaims")

    def list_resource_claim_templates(self) -> list[dict[str, Any]]:
        return self._list("resourceclaimtemplates")

    def list_resource_slices(self) -> list[dict[str, Any]]:
        return self._list("resourceslices")

    def list_device_classes(self) -> list[dict[str, Any]]:
        return self._list("deviceclasses")

    def _list(self, resource: str) -> list[dict[str, Any]]:
        path = f"{GROUP}/{resource}"
        found: list[dict[str, Any]] = []
        token = ""
        while True:
            query = [("limit", str(PAGE))] + ([("continue", token)] if token else [])
            try:
                page = self._api.get(path, query)
            except NotFound:
                return []
            found.extend(item for item in page.get("items") or () if isinstance(item, dict))
            token = str((page.get("metadata") or {}).get("continue") or "")
            if not token:
                return found
