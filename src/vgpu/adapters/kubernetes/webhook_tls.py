"""`WebhookTLSPort` over the Kubernetes API: one Secret, and one MutatingWebhookConfiguration.

API calls (RBAC in charts/vgpu/templates/scheduler/rbac.yaml): secrets get, create, update
(the named Secret); mutatingwebhookconfigurations get, patch (the named configuration).
"""

import base64
from collections.abc import Mapping
from typing import Any

from kubernetes.client import ApiClient

from vgpu.adapters.kubernetes.api import KubeApi, namespaced, object_path
from vgpu.ports.cluster import Conflict, NotFound
from vgpu.ports.webhook_tls import StoredCerts

WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


class KubernetesWebhookTLS:
    def __init__(
        self, api_client: ApiClient, *, namespace: str, secret_name: str, webhook_name: str
    ) -> None:
        self._api = KubeApi(api_client)
        self._secrets = namespaced("secrets", namespace)
        self._secret = object_path(self._secrets, secret_name)
        self._secret_meta = {"name": secret_name, "namespace": namespace}
        self._webhook = object_path(WEBHOOKS, webhook_name)

    def load(self) -> StoredCerts | None:
        try:
            secret = self._api.get(self._secret)
        except NotFound:
            return None
        raw = secret.get("data") or {}
        data = {key: base64.b64decode(value) for key, value in raw.items()}
        return StoredCerts(data, str(secret["metadata"].get("resourceVersion", "")))

    def save(self, data: Mapping[str, bytes], replaces: StoredCerts | None) -> bool:
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": dict(self._secret_meta),
            "type": "Opaque",
            "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
        }
        try:
            if replaces is None:
                self._api.post(self._secrets, body)
            else:
                body["metadata"]["resourceVersion"] = replaces.version
                self._api.put(self._secret, body)
        except Conflict:
            return False
        return True

    def trust(self, ca_bundle: bytes) -> None:
        config = self._api.get(self._webhook)
        encoded = base64.b64encode(ca_bundle).decode()
        webhooks = [
            {**hook, "clientConfig": {**hook.get("clientConfig", {}), "caBundle": encoded}}
            for hook in config.get("webhooks") or []
        ]
        # a merge patch replaces the whole list; the resourceVersion makes it fail rather than
        # undo another writer's change made since the read
        version = config["metadata"].get("resourceVersion")
        self._api.merge_patch(
            self._webhook, {"metadata": {"resourceVersion": version}, "webhooks": webhooks}
        )
