"""Which ResourceClaims each container of a pod uses, read from the pod's JSON.

A container lists the pod's claims it uses (`resources.claims[].name`); the pod maps each such
name to a ResourceClaim, either by name (`spec.resourceClaims[].resourceClaimName`) or, for a
claim made from a template, through `status.resourceClaimStatuses`. HAMi-core reads one set of
limits per container (`CUDA_DEVICE_MEMORY_LIMIT_0` from one claim would be overwritten by the
same variable from another), so the driver refuses a claim that shares a container with another
claim of its own; this module finds the candidates.

>>> pod = {"metadata": {"name": "p", "namespace": "ml"},
...        "spec": {"resourceClaims": [{"name": "a", "resourceClaimName": "gpu-a"},
...                                    {"name": "b", "resourceClaimTemplateName": "t"}],
...                 "containers": [{"name": "main", "resources": {"claims": [
...                     {"name": "a"}, {"name": "b"}]}}]},
...        "status": {"resourceClaimStatuses": [{"name": "b", "resourceClaimName": "p-b-x1"}]}}
>>> claims_beside(pod, "gpu-a")
{'main': ('p-b-x1',)}
"""

from collections.abc import Mapping
from typing import Any


def claims_beside(pod: Mapping[str, Any], claim_name: str) -> dict[str, tuple[str, ...]]:
    """By container name, the other ResourceClaims (by name) of each container of `pod` that
    uses the claim `claim_name`; containers that use no other claim are left out. A pod whose
    JSON is not as the API server writes it yields nothing (the claim's own checks decide)."""
    spec = _object(pod.get("spec"))
    names = _claim_names(spec, _object(pod.get("status")))
    found: dict[str, tuple[str, ...]] = {}
    for container in [*_list(spec.get("initContainers")), *_list(spec.get("containers"))]:
        container = _object(container)
        used = {
            names[ref]
            for entry in _list(_object(container.get("resources")).get("claims"))
            if isinstance(ref := _object(entry).get("name"), str) and ref in names
        }
        if claim_name in used and len(used) > 1:
            found[str(container.get("name") or "")] = tuple(sorted(used - {claim_name}))
    return found


def _claim_names(spec: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, str]:
    """The pod's claim entries (their names in the pod) to ResourceClaim names."""
    names: dict[str, str] = {}
    for entry in map(_object, _list(spec.get("resourceClaims"))):
        name, claim = entry.get("name"), entry.get("resourceClaimName")
        if isinstance(name, str) and isinstance(claim, str):
            names[name] = claim
    for entry in map(_object, _list(status.get("resourceClaimStatuses"))):
        name, claim = entry.get("name"), entry.get("resourceClaimName")
        if isinstance(name, str) and isinstance(claim, str) and name not in names:
            names[name] = claim
    return names


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
