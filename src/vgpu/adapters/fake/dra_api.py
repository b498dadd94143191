"""DraApiPort in memory: ResourceSlices, ResourceClaims and Pods as JSON, with resourceVersions
and the API's answers to a create that exists (Conflict), a stale replace (Conflict) and a
missing object (NotFound). For `vgpu dra-driver --fake-cluster`, unit tests and embedders."""

import copy
import threading
from collections.abc import Mapping
from typing import Any

from vgpu.ports.cluster import Conflict, NotFound


class FakeDraApi:
    """`writes` counts the slice creates, replaces and deletes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version = 0
        self._slices: dict[str, dict[str, Any]] = {}
        self._claims: dict[tuple[str, str], dict[str, Any]] = {}
        self._pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes = 0

    # DraApiPort -------------------------------------------------------------------------------
    def list_slices(self, driver: str, node: str) -> list[dict[str, Any]]:
        with self._lock:
            return [
                copy.deepcopy(s)
                for s in self._slices.values()
                if s.get("spec", {}).get("driver") == driver
                and s.get("spec", {}).get("nodeName") == node
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
            if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
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
        meta = manifest["metadata"]
        with self._lock:
            self._claims[(meta["namespace"], meta["name"])] = copy.deepcopy(dict(manifest))

    def delete_claim(self, namespace: str, name: str) -> None:
        with self._lock:
            self._claims.pop((namespace, name), None)

    def put_pod(self, manifest: Mapping[str, Any]) -> None:
        meta = manifest["metadata"]
        with self._lock:
            self._pods[(meta.get("namespace", "default"), meta["name"])] = copy.deepcopy(
                dict(manifest)
            )

    def slices(self) -> list[dict[str, Any]]:
        """Every slice stored, of any driver and node."""
        with self._lock:
            return copy.deepcopy(list(self._slices.values()))

    def _store_slice(self, name: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
        self._version += 1
        stored = copy.deepcopy(dict(manifest))
        stored["metadata"]["resourceVersion"] = str(self._version)
        self._slices[name] = stored
        self.writes += 1
        return copy.deepcopy(stored)
