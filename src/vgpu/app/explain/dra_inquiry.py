"""Explain a pod that asks for devices through DRA: read the ResourceSlices, DeviceClasses and
ResourceClaims once, then ask the domain's port of kube-scheduler's allocator on every node.

The pod's claims are those its `spec.resourceClaims` name, or the claims made from its
templates (read from the template when none is made yet, as for a pod not yet created). A claim
of another pod that cannot be read is left out with a note (what it holds is then not counted:
nodes may look emptier than they are); the pod's own must be readable.
"""

import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from vgpu.domain import DomainError, Pod
from vgpu.domain.dra import (
    Allocator,
    ClaimsExplanation,
    ResourceClaim,
    explain_claims,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
)
from vgpu.ports.cluster import ClusterPort
from vgpu.ports.dra import DraReadPort

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_NOTES = 5  # unreadable objects named; the rest counted


class DraInquiry:
    """Why a pod's claims can or cannot be allocated on the cluster as it is now."""

    def __init__(self, dra: DraReadPort, cluster: ClusterPort) -> None:
        self._dra = dra
        self._cluster = cluster

    def explain(self, pod: Pod) -> ClaimsExplanation:
        """DomainError when one of the pod's own claims cannot be found or read."""
        notes: list[str] = []
        slices = _readable(self._dra.list_resource_slices(), parse_resource_slice, notes)
        classes = _readable(self._dra.list_device_classes(), parse_device_class, notes)
        documents = self._dra.list_resource_claims()
        mine_named = _owned_by(pod)
        claims = {c.key: c for c in _readable(documents, parse_resource_claim, notes, mine_named)}
        for document in filter(mine_named, documents):  # the pod's own: an error stops here
            claim = parse_resource_claim(document)
            claims[claim.key] = claim
        mine = [
            self._claim(pod, entry.name, entry.claim, entry.template, claims)
            for entry in pod.claims
        ]
        pending = [c for c in mine if c.allocation is None]
        nodes = sorted(
            {n.name for n in self._cluster.list_nodes()}
            | {s.node_name for s in slices if s.node_name}
        )
        for claim in mine:
            if claim.allocation is not None:
                where = claim.allocation.node_name
                notes.append(f"claim {claim.key} is allocated" + (f" on {where}" if where else ""))
                if where:
                    nodes = [n for n in nodes if n == where]
        if len(notes) > MAX_NOTES:
            notes[MAX_NOTES:] = [f"and {len(notes) - MAX_NOTES} more"]
        allocated = [c for c in claims.values() if c.allocation is not None]
        if not pending:
            return ClaimsExplanation(
                pod.key,
                tuple(c.key for c in mine),
                "its claims are all allocated: it waits for something other than devices",
                None,
                (),
                notes=tuple(notes),
                allocated=True,
            )
        return explain_claims(
            pod.key, pending, Allocator(slices, classes), allocated, nodes, notes=notes
        )

    def _claim(
        self,
        pod: Pod,
        entry: str,
        name: str,
        template: str,
        claims: dict[str, ResourceClaim],
    ) -> ResourceClaim:
        if name:
            found = claims.get(f"{pod.namespace}/{name}")
            if found is not None:
                return found
            if not template:
                raise DomainError(f"pod {pod.key}: resource claim {name} ({entry}) not found")
        if not template:
            raise DomainError(f"pod {pod.key}: resourceClaims entry {entry!r} names no claim")
        for document in self._dra.list_resource_claim_templates():
            meta = document.get("metadata") or {}
            if meta.get("namespace") == pod.namespace and meta.get("name") == template:
                spec = (document.get("spec") or {}).get("spec") or {}
                made = {
                    "metadata": {"name": f"{pod.name}-{entry}", "namespace": pod.namespace},
                    "spec": spec,
                }
                return parse_resource_claim(made)
        raise DomainError(f"pod {pod.key}: resource claim template {template} ({entry}) not found")


def _owned_by(pod: Pod) -> Callable[[dict[str, Any]], bool]:
    """Whether a claim document is one of the pod's (read apart, its errors reported)."""
    names = {c.claim for c in pod.claims if c.claim}

    def mine(document: dict[str, Any]) -> bool:
        meta = document.get("metadata") or {}
        return meta.get("namespace") == pod.namespace and meta.get("name") in names

    return mine


def _readable(
    documents: Iterable[dict[str, Any]],
    parse: Callable[[Any], T],
    notes: list[str],
    skip: Callable[[dict[str, Any]], bool] = lambda _: False,
) -> list[T]:
    found = []
    for document in documents:
        if skip(document):
            continue
        try:
            found.append(parse(document))
        except DomainError as exc:
            log.warning("left out: %s", exc)
            notes.append(f"left out: {exc}")
    return found
