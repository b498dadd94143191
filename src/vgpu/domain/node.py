"""The parts of a Kubernetes Node the GPU rules read."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vgpu.domain.codec import decode_node_devices
from vgpu.domain.device import Device
from vgpu.domain.selectors import parse_uuid_list
from vgpu.domain.topology import SCORE_ANNOTATION, decode_pair_scores
from vgpu.domain.vendor import Vendor


@dataclass(frozen=True, slots=True)
class ClusterNode:
    """The parts of a Kubernetes Node the rules read: its name, annotations (the registered
    cards, pair scores, cordoned cards, the node lock) and allocatable resources. Build one
    directly or from the Node's JSON with `node_from_manifest`."""

    name: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""

    def devices(self, vendor: Vendor) -> list[Device]:
        """The cards the device plugin registered; CodecError if the annotation is malformed."""
        text = self.annotations.get(vendor.register_annotation)
        return [] if text is None else decode_node_devices(text, vendor.register_annotation)

    def pair_scores(self) -> dict[str, dict[str, int]]:
        """The NVLink/PCIe pair scores in `hami.io/node-nvidia-score` (empty without it);
        CodecError if malformed, which, as in HAMi, makes the node's GPUs unusable."""
        text = self.annotations.get(SCORE_ANNOTATION)
        return {} if text is None else decode_pair_scores(text)

    def cordoned(self, vendor: Vendor) -> frozenset[str]:
        """The UUIDs of the cards `hami.io/device-cordon` takes out of scheduling."""
        return parse_uuid_list(self.annotations.get(vendor.cordon_annotation, ""))


def node_from_manifest(manifest: Mapping[str, Any]) -> ClusterNode:
    """Read a Node from its Kubernetes JSON (name, annotations, `status.allocatable`)."""
    meta = manifest.get("metadata") or {}
    status = manifest.get("status") or {}
    return ClusterNode(
        name=str(meta.get("name") or ""),
        annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
        allocatable={str(k): str(v) for k, v in (status.get("allocatable") or {}).items()},
        resource_version=str(meta.get("resourceVersion") or ""),
    )
