"""The grant key ring in a Kubernetes Secret: `data` maps key names to raw key bytes."""

import base64
import binascii
from typing import Any

from kubernetes.client import ApiClient

from vgpu.adapters.kubernetes.api import KubeApi, namespaced, object_path
from vgpu.domain.trust import KeyRing
from vgpu.ports.cluster import ClusterError, Conflict, NotFound


class SecretGrantKeys:
    """Implements GrantKeyPort over one Secret (`namespace/name`)."""

    def __init__(
        self, api_client: ApiClient, namespace: str, name: str, *, timeout: float = 10.0
    ) -> None:
        self._api = KubeApi(api_client, timeout=timeout)
        self._namespace = namespace
        self._name = name

    def load(self) -> KeyRing | None:
        try:
            secret = self._api.get(object_path(namespaced("secrets", self._namespace), self._name))
        except NotFound:
            return None
        data = secret.get("data") or {}
        if not data:
            return None
        return KeyRing({str(name): self._decode(name, value) for name, value in data.items()})

    def create(self, ring: KeyRing) -> KeyRing:
        manifest = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": self._name, "namespace": self._namespace},
            "type": "Opaque",
            "data": {name: base64.b64encode(key).decode() for name, key in ring.keys.items()},
        }
        try:
            self._api.post(namespaced("secrets", self._namespace), manifest)
        except Conflict:
            stored = self.load()
            if stored is None:
                raise
            return stored
        return ring

    def _decode(self, name: Any, value: Any) -> bytes:
        try:
            return base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ClusterError(
                f"Secret {self._namespace}/{self._name}: key {name!r} is not base64: {exc}"
            ) from exc
