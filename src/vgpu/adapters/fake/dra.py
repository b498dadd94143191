"""The API server's `resource.k8s.io/v1` objects in memory, and the pods that use them: for
`--fake-cluster` (whose file lists them), unit tests and embedders. One store serves both DRA
ports: `vgpu explain` lists the objects (DraReadPort), `vgpu dra-driver` writes its
ResourceSlices and reads claims and pods (DraApiPort), the webhook gets and makes
ResourceClaimTemplates (ClaimTemplatePort), with resourceVersions and the API's
answers to a create that exists (Conflict), a stale replace (Conflict) and a missing object
(NotFound).

Objects are kept as given: one that is not as the API server writes it is reported by whoever
reads it (field by field), never refused here.
"""

import copy
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from vgpu.ports.cluster import Conflict, NotFound

_Key = tuple[str, str]


class FakeDraApi:
    """Implements DraReadPort, DraApiPort and ClaimTemplatePort; every answer is a copy. `writes`
    counts the slice creates, replaces and deletes."""

    def __init__(
        self,
        claims: Iterable[Mapping[str, Any]] = (),
        templates: Iterable[Mapping[str, Any]] = (),
        slices: Iterable[Mapping[str, Any]] = (),
        classes: Iterable[Mapping[str, Any]] = (),
        pods: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        self._lock = threading.Lock()
        self._version = 0
        self._claims = _by_key(claims)
        self.templates = [copy.deepcopy(dict(t)) for t in templates]
        self._slices = {name: manifest for (_, name), manifest in _by_key(slices).items()}
        self._classes = [copy.deepcopy(dict(c)) for c in classes]
        self._pods = _by_key(pods)
        self.writes = 0

    # DraReadPort ------------------------------------------------------------------------------
    def list_resource_claims(self) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(list(self._claims.values()))

    def list_resource_claim_templates(self) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self.templates)

    # ClaimTemplatePort ------------------------------------------------------------------------
    def get_claim_template(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._template(namespace, name)
            return copy.deepcopy(found) if found is not None else None

    def create_claim_template(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        meta = manifest["metadata"]
        with self._lock:
            if self._template(meta["namespace"], meta["name"]) is not None:
                raise Conflict(f"resourceclaimtemplates {meta['name']!r} already exists")
            self.templates.append(copy.deepcopy(dict(manifest)))
            return copy.deepcopy(dict(manifest))

    def _template(self, namespace: str, name: str) -> dict[str, Any] | None:
        for template in self.templates:
            meta = _object(template.get("metadata"))
            if meta.get("namespace") == namespace and meta.get("name") == name:
                return template
        return None

    def list_resource_slices(self) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(list(self._slices.values()))

    def list_device_classes(self) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._classes)

    # DraApiPort -------------------------------------------------------------------------------
    def list_slices(self, driver: str, node: str) -> list[dict[str, Any]]:
        with self._lock:
            return [
                copy.deepcopy(s)
                for s in self._slices.values()
                if (spec := _object(s.get("spec"))).get("driver") == driver
                and spec.get("nodeName") == node
            ]

    def create_slice(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            name = manifest["metadata"]["name"]
            if name in self._slices:
                raise Conflict(f"resourceslices {name!r} already exists")
            return self._store_slice(name, manifest)

    def replace_slice(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            name = manifest["metadata"]["name"]
            current = self._slices.get(name)
            if current is None:
                raise NotFound(f"resourceslices {name!r} not found")
            wanted = manifest["metadata"].get("resourceVersion")
            if wanted is not None and wanted != _object(current.get("metadata")).get(
                "resourceVersion"
            ):
                raise Conflict(f"resourceslices {name!r}: the object has been modified")
            return self._store_slice(name, manifest)

    def delete_slice(self, name: str) -> None:
        with self._lock:
            if self._slices.pop(name, None) is None:
                raise NotFound(f"resourceslices {name!r} not found")
            self.writes += 1

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._claims.get((namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._pods.get((namespace, name))
            return copy.deepcopy(found) if found is not None else None

    # test and fake-mode controls ----------------------------------------------------------------
    def put_claim(self, manifest: Mapping[str, Any]) -> None:
        """Add or replace a ResourceClaim (its namespace and name from its metadata)."""
        with self._lock:
            self._claims[_key(manifest, len(self._claims))] = copy.deepcopy(dict(manifest))

    def delete_claim(self, namespace: str, name: str) -> None:
        with self._lock:
            self._claims.pop((namespace, name), None)

    def put_pod(self, manifest: Mapping[str, Any]) -> None:
        """Add or replace a Pod (namespace `default` unless its metadata says)."""
        with self._lock:
            self._pods[_key(manifest, len(self._pods))] = copy.deepcopy(dict(manifest))

    def slices(self) -> list[dict[str, Any]]:
        """Every slice stored, of any driver and node."""
        return self.list_resource_slices()

    def _store_slice(self, name: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
        self._version += 1
        stored = copy.deepcopy(dict(manifest))
        stored["metadata"]["resourceVersion"] = str(self._version)
        self._slices[name] = stored
        self.writes += 1
        return copy.deepcopy(stored)


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _key(manifest: Mapping[str, Any], position: int) -> _Key:
    """`(namespace, name)` from the metadata; an object without them keeps a key of its own
    (its reader reports what is missing)."""
    meta = _object(manifest.get("metadata")) if isinstance(manifest, Mapping) else {}
    namespace, name = meta.get("namespace", "default"), meta.get("name")
    if isinstance(namespace, str) and isinstance(name, str):
        return namespace, name
    return "", f"#{position}"


def _by_key(manifests: Iterable[Mapping[str, Any]]) -> dict[_Key, dict[str, Any]]:
    found: dict[_Key, dict[str, Any]] = {}
    for manifest in manifests:
        found[_key(manifest, len(found))] = copy.deepcopy(dict(manifest))
    return found
