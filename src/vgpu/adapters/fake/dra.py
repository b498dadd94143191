"""DraReadPort in memory: the DRA objects a test or a `--fake-cluster` file puts there."""

from collections.abc import Iterable
from copy import deepcopy
from typing import Any


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

    def list_resource_claims(self) -> list[dict[str, Any]]:
        return deepcopy(self.claims)

    def list_resource_claim_templates(self) -> list[dict[str, Any]]:
        return deepcopy(self.templates)

    def list_resource_slices(self) -> list[dict[str, Any]]:
        return deepcopy(self.slices)

    def list_device_classes(self) -> list[dict[str, Any]]:
        return deepcopy(self.classes)
