"""The grant-signing key ring kept in a Kubernetes Secret (implements GrantKeyPort).

The Secret's `data` maps key names to raw key bytes (base64, as every Secret value is). The
scheduler creates it with one key when absent; the device plugin only reads it. A rotation is
an edit of the Secret that adds a key with a greater name.
"""

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from kubernetes.client import ApiClient

from vgpu.adapters.kubernetes.api import KubeApi, namespaced, object_path
from vgpu.domain.errors import DomainError
from vgpu.domain.signing import KeyRing
from vgpu.ports.cluster import ClusterError, Conflict, NotFound


class SecretGrantKeys:
    """Reads (and creates) the key ring in Secret `namespace/name`."""

    def __init__(
        self, api_client: ApiClient, namespace: str, name: str, *, timeout: float = 10.0
    ) -> None:
        self._api = KubeApi(api_client, timeout=timeout)
        self._namespace = namespace
        self._name = name
        self._collection = namespaced("secrets", namespace)

    @property
    def where(self) -> str:
        """The Secret, as messages name it."""
        return f"Secret {self._namespace}/{self._name}"

    def load(self) -> KeyRing | None:
        """The ring in the Secret, None when there is no Secret; ClusterError if unusable."""
        try:
            secret = self._api.get(object_path(self._collection, self._name))
        except NotFound:
            return None
        return self._ring(secret)

    def create(self, ring: KeyRing) -> KeyRing:
        """Create the Secret holding `ring`; if another replica created it first, read theirs."""
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": self._name, "namespace": self._namespace},
            "data": {name: base64.b64encode(key).decode() for name, key in ring.keys.items()},
        }
        try:
            return self._ring(self._api.post(self._collection, body))
        except Conflict:
            stored = self.load()
            if stored is None:
                raise ClusterError(f"{self.where} exists and then does not; try again") from None
            return stored

    def _ring(self, secret: Mapping[str, Any]) -> KeyRing:
        data = secret.get("data") or {}
        if not isinstance(data, Mapping):
            raise ClusterError(f"{self.where}: data must be an object")
        keys: dict[str, bytes] = {}
        for name, value in data.items():
            try:
                keys[str(name)] = base64.b64decode(str(value), validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ClusterError(f"{self.where}: key {name!r} is not base64: {exc}") from None
        try:
            return KeyRing(keys)
        except DomainError as exc:
            raise ClusterError(f"{self.where}: {exc}") from None
