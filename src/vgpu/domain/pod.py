"""The parts of a Kubernetes Pod the scheduling rules read, built from its JSON manifest."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from sys import intern
from types import MappingProxyType
from typing import Any

from vgpu.domain.errors import DomainError
from vgpu.domain.initrelease import InitProgress, init_progress
from vgpu.domain.manifest import list_field, object_field


@dataclass(frozen=True, slots=True)
class ContainerClaim:
    """One entry of a container's `resources.claims`: the pod's claim entry it uses (`name`,
    an entry of `spec.resourceClaims`) and, when it uses one request of it only, `request`."""

    name: str
    request: str = ""


@dataclass(frozen=True, slots=True)
class Container:
    """A container's name and the parts the rules read: `limits` and `requests` map resource
    names to quantities as Kubernetes writes them (`{"nvidia.com/gpu": 1, "nvidia.com/gpumem":
    "20Gi"}`), `env` its plain variables, `privileged` its security context's flag; `is_init`
    marks an init container; `claims` the DRA claims it uses."""

    name: str
    limits: Mapping[str, Any] = field(default_factory=dict)
    requests: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    privileged: bool = False
    is_init: bool = False
    claims: tuple[ContainerClaim, ...] = ()


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One entry of a pod's `spec.resourceClaims`: the ResourceClaim it names, or the
    template one is made from (`claim` is then the made claim's name, from
    `status.resourceClaimStatuses`, or "" until it exists)."""

    name: str
    claim: str = ""
    template: str = ""


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod's identity, annotations and containers, init containers first.

    Read one from the API server's JSON with `pod_from_manifest`, or build it directly::

        Pod("ml", "train", containers=(
            Container("main", limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 20000}),
        ))

    A pod that has not been placed needs only the namespace, the name, the containers and
    the annotations that carry its policies and card constraints."""

    namespace: str
    name: str
    uid: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    containers: Sequence[Container] = ()
    node_name: str = ""
    scheduler_name: str = ""
    phase: str = "Pending"
    labels: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""
    priority: int = 0  # spec.priority, as the API server resolved it from the PriorityClass
    init_status: InitProgress | None = None  # from status.initContainerStatuses, when read
    deleting: bool = False  # metadata.deletionTimestamp is set: the pod is going away
    claims: tuple[PodClaim, ...] = ()  # spec.resourceClaims (DRA)

    @property
    def init_progress(self) -> InitProgress:
        """Which init containers are sidecars and whether the others have all succeeded (not
        yet, when the statuses were never read)."""
        return self.init_status or InitProgress(self.init_count)

    @property
    def key(self) -> str:
        """`namespace/name`, the pod's identity in the ledger and in logs."""
        return f"{self.namespace}/{self.name}"

    @property
    def init_count(self) -> int:
        """How many of `containers` are init containers (they come first)."""
        return sum(1 for c in self.containers if c.is_init)

    @property
    def is_finished(self) -> bool:
        """Whether the pod has ended (Succeeded or Failed) and so holds nothing."""
        return self.phase in ("Succeeded", "Failed")


# A scheduler holds tens of thousands of pods: the words they repeat (namespace, node, phase,
# container names) are interned and empty mappings shared, so each is stored once.
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _word(value: Any) -> str:
    """`str(value or "")`, interned."""
    return intern(str(value or ""))


def _owned(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    """A copy the pod owns (the manifest may change later), or the shared empty mapping."""
    if not mapping:
        return _EMPTY
    return {intern(k) if type(k) is str else k: v for k, v in mapping.items()}


def _texts(raw: Any, where: str) -> Mapping[str, str]:
    """Annotations or labels as strings, keys interned; the shared empty mapping if none."""
    items = object_field(raw or None, where)
    return {intern(str(k)): str(v) for k, v in items.items()} if items else _EMPTY


def pod_from_manifest(manifest: Mapping[str, Any]) -> Pod:
    """Read a Pod from its Kubernetes JSON (as the API server or an AdmissionReview sends it).

    Raises DomainError when a part that must be an object is something else.
    """
    meta = object_field(manifest.get("metadata"), "metadata")
    spec = object_field(manifest.get("spec"), "spec")
    status = object_field(manifest.get("status"), "status")
    init_containers = list_field(spec.get("initContainers"), "initContainers")
    containers = [_container(c, is_init=True) for c in init_containers] + [
        _container(c, is_init=False) for c in list_field(spec.get("containers"), "containers")
    ]
    return Pod(
        namespace=_word(meta.get("namespace") or "default"),
        name=str(meta.get("name") or meta.get("generateName") or ""),
        uid=str(meta.get("uid") or ""),
        annotations=_texts(meta.get("annotations"), "annotations"),
        containers=tuple(containers),
        node_name=_word(spec.get("nodeName")),
        scheduler_name=_word(spec.get("schedulerName")),
        phase=_word(status.get("phase") or "Pending"),
        labels=_texts(meta.get("labels"), "labels"),
        resource_version=str(meta.get("resourceVersion") or ""),
        priority=_priority(spec.get("priority")),
        init_status=init_progress(manifest),
        claims=_claims(spec, status),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def _claims(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[PodClaim, ...]:
    """`spec.resourceClaims`, with the names of the claims made from templates."""
    entries = list_field(spec.get("resourceClaims"), "resourceClaims")
    if not entries:
        return ()
    made = {
        str(s.get("name")): str(s.get("resourceClaimName") or "")
        for s in list_field(status.get("resourceClaimStatuses"), "resourceClaimStatuses")
        if isinstance(s, Mapping)
    }
    claims = []
    for entry in entries:
        entry = object_field(entry, "resourceClaims[]")
        name = str(entry.get("name") or "")
        template = str(entry.get("resourceClaimTemplateName") or "")
        claim = str(entry.get("resourceClaimName") or "") or made.get(name, "")
        claims.append(PodClaim(name, claim, template))
    return tuple(claims)


def _priority(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise DomainError(f"pod spec.priority must be an integer, got {value!r}")
    return value


def _container(raw: Any, *, is_init: bool) -> Container:
    raw = object_field(raw, "container")
    resources = object_field(raw.get("resources"), "container resources")
    security = object_field(raw.get("securityContext"), "container securityContext")
    env = {
        str(e.get("name")): str(e.get("value", ""))
        for e in list_field(raw.get("env"), "container env")
        if isinstance(e, Mapping) and e.get("name")
    }
    return Container(
        name=_word(raw.get("name")),
        limits=_owned(object_field(resources.get("limits"), "resources.limits")),
        requests=_owned(object_field(resources.get("requests"), "resources.requests")),
        env=_owned(env),
        privileged=bool(security.get("privileged", False)),
        is_init=is_init,
        claims=tuple(
            ContainerClaim(str(c.get("name") or ""), str(c.get("request") or ""))
            for c in list_field(resources.get("claims"), "resources.claims")
            if isinstance(c, Mapping)
        ),
    )
