"""DraReadPort and ClaimTemplatePort in memory: the DRA objects a test or a `--fake-cluster`
file puts there, and the templates the webhook makes."""

import threading
from collections.abc import Iterable, Mapping
from copy import deepcopy
from typing import Any

from vgpu.ports.cluster import Conflict


class FakeDraObjects:
    """ResourceClaims, templates, ResourceSlices and DeviceClasses as JSON mappings; every
    list is a copy."""

    def __init__(
        self,
        claims: Iterable[dict[str, Any]] = (),
        templates: Iterable[dict[str, Any]] = (),
        slices: Iterable[dict[str, Any]] = (),
        classes: Iterable[dict[str, Any]] = (),
    ) -> None:
        self.claims = list(claims)
        self.templates = list(templates)
        self.slices = list(slices)
        self.classes = list(classes)
        self._lock = threading.Lock()

    def list_resource_claims(self) -> list[dict[str, Any]]:
        return deepcopy(self.claims)

    def list_resource_claim_templates(self) -> list[dict[str, Any]]:
        with self._lock:
            return deepcopy(self.templates)

    def get_claim_template(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._template(namespace, name)
            return deepcopy(found) if found is not None else None

    def create_claim_template(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        meta = manifest["metadata"]
        with self._lock:
            if self._template(meta["namespace"], meta["name"]) is not None:
                raise Conflict(f"resourceclaimtemplates {meta['name']!r} already exists")
            self.templates.append(deepcopy(dict(manifest)))
            return deepcopy(dict(manifest))

    def _template(self, namespace: str, name: str) -> dict[str, Any] | None:
        for template in self.templates:
            meta = template.get("metadata") or {}
            if meta.get("namespace") == namespace and meta.get("name") == name:
                return template
        return None

    def list_resource_slices(self) -> list[dict[str, Any]]:
        return deepcopy(self.slices)

    def list_device_classes(self) -> list[dict[str, Any]]:
        return deepcopy(self.classes)
