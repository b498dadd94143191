"""The three kinds the cluster adapter caches: where they are listed and how they are read."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from vgpu.domain.manifest import object_field
from vgpu.domain.node import ClusterNode, node_from_manifest
from vgpu.domain.pod import Pod, pod_from_manifest
from vgpu.ports.cluster import Kind, Quota

T = TypeVar("T", ClusterNode, Pod, Quota)


@dataclass(frozen=True, slots=True)
class ResourceSpec(Generic[T]):
    """One kind: its list/watch path, its converter, and an optional field selector."""

    kind: Kind
    path: str
    convert: Callable[[Mapping[str, Any]], T]
    field_selector: str = ""


def quota_from_manifest(manifest: Mapping[str, Any]) -> Quota:
    meta = object_field(manifest.get("metadata"), "metadata", "ResourceQuota")
    spec = object_field(manifest.get("spec"), "spec", "ResourceQuota")
    hard = object_field(spec.get("hard"), "spec.hard", "ResourceQuota")
    return Quota(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        hard=dict(hard),
    )


def manifest_key(kind: Kind, manifest: Mapping[str, Any]) -> str:
    """The cache key of a raw object (even one that does not convert): name or namespace/name."""
    meta = manifest.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = str(meta.get("name") or "")
    return name if kind is Kind.NODE else f"{meta.get('namespace') or 'default'}/{name}"


def nodes(field_selector: str = "") -> ResourceSpec[ClusterNode]:
    """All nodes, or those a field selector picks (`metadata.name=gpu-1` for one node)."""
    return ResourceSpec(Kind.NODE, "/api/v1/nodes", node_from_manifest, field_selector)


def pods(field_selector: str = "") -> ResourceSpec[Pod]:
    """All pods, or those a field selector picks (e.g. `spec.nodeName=gpu-1` for one node)."""
    return ResourceSpec(Kind.POD, "/api/v1/pods", pod_from_manifest, field_selector)


def quotas() -> ResourceSpec[Quota]:
    return ResourceSpec(Kind.QUOTA, "/api/v1/resourcequotas", quota_from_manifest)

