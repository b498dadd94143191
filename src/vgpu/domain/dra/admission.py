"""The webhook in DRA mode: a pod's `nvidia.com/gpu*` requests become ResourceClaims, so the
pod specs HAMi users write run on nodes where `vgpu dra-driver` serves the GPUs.

Each container that asks for GPUs gets a claim of its own, made from a ResourceClaimTemplate
in the pod's namespace: its request (one, named `gpu`) is the container's part of
`plan_claim`. One claim per container, not one per pod, because the driver hands a claim's
limits to every container that uses it, indexed by the claim's devices: a container that used
one request of a shared claim would see the others' GPUs and read the wrong per-device limit.
Templates are named after a hash of what they ask (`vgpu-<hash>`), so pods that ask alike
share one and a retried admission finds the one it made.

The pod is changed at CREATE:

- the vgpu resources (`nvidia.com/gpu`, `gpumem`, `gpumem-percentage`, `gpucores`,
  `priority`) leave each container's limits and requests (no node advertises them in DRA
  mode; the priority becomes `CUDA_TASK_PRIORITY`, as in device-plugin mode);
- `spec.resourceClaims` gets one entry per claim (`vgpu-<container>`, or `vgpu-<n>` where
  that name is too long or taken), naming its template, and each GPU container lists its
  entry in `resources.claims`;
- an init container that is not a sidecar runs alone, before the app containers, so it uses
  the claim of an app container (or an earlier init container) that asks exactly the same,
  and gets a claim of its own otherwise: DRA allocates every claim for the pod's whole life;
- a pod that names claims already keeps them; ours are added beside them (the driver refuses a
  container that would get two claims of its own, which the webhook cannot see without
  reading the other claims).

The scheduler name is left as it is: the stock kube-scheduler allocates claims. What DRA has no
word for (the split count, vgpu's namespace GPU quota) is left out, as in `plan_claim`.
"""

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from vgpu.domain.admission import (
    AdmissionConfig,
    AdmissionDecision,
    GpuPod,
    container_env,
    screen_pod,
    without_scheduler_owned,
)
from vgpu.domain.decision import plan_pod
from vgpu.domain.device import Device
from vgpu.domain.dra.from_plan import plan_claim
from vgpu.domain.dra.gpu import DEFAULT_DRIVER
from vgpu.domain.dra.model import DeviceRequest, ResourceClaim
from vgpu.domain.dra.read import parse_resource_claim
from vgpu.domain.dra.write import resource_claim_json
from vgpu.domain.errors import DomainError, DraError
from vgpu.domain.fit import PodPlan
from vgpu.domain.json_patch import append_patches, container_slots, env_patches, escape
from vgpu.domain.request import ContainerRequest

GPU_REQUEST = "gpu"
"""The name of the one request of every claim the webhook writes."""
TEMPLATE_PREFIX = "vgpu-"
ENTRY_PREFIX = "vgpu-"
MANAGED_BY = {"app.kubernetes.io/managed-by": "vgpu"}
REQUEST_ANNOTATION = "vgpu.io/request"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True, slots=True)
class DraAdmissionConfig:
    """The webhook's settings (`admission`: resource names, defaults, env policies) and the
    DRA driver and DeviceClass the claims ask for (the class defaults to the driver's name)."""

    admission: AdmissionConfig
    driver: str = DEFAULT_DRIVER
    device_class: str = ""


@dataclass(frozen=True, slots=True)
class ClaimTemplate:
    """A ResourceClaimTemplate the pod's claims are made from: `claim` holds its spec."""

    claim: ResourceClaim
    description: str

    @property
    def key(self) -> str:
        """`namespace/name`."""
        return self.claim.key

    def manifest(self) -> dict[str, Any]:
        """The object to create."""
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {
                "name": self.claim.name,
                "namespace": self.claim.namespace,
                "labels": dict(MANAGED_BY),
                "annotations": {REQUEST_ANNOTATION: self.description},
            },
            "spec": {"spec": resource_claim_json(self.claim)["spec"]},
        }

    def matches(self, stored: Mapping[str, Any]) -> bool:
        """Whether a stored template asks what this one asks (read as the API server wrote
        it back, with its defaults): one that does not read does not match."""
        spec = stored.get("spec")
        made = {
            "metadata": {"name": self.claim.name, "namespace": self.claim.namespace},
            "spec": spec.get("spec") if isinstance(spec, Mapping) else None,
        }
        try:
            found = parse_resource_claim(made)
        except DraError:
            return False
        return (found.requests, found.constraints) == (self.claim.requests, self.claim.constraints)


@dataclass(frozen=True, slots=True)
class DraPod:
    """A GPU pod the webhook translates: what screening read, and its plan."""

    manifest: Mapping[str, Any]
    namespace: str  # where it is created (a pod being created may not name its namespace)
    screened: GpuPod
    plan: PodPlan

    @property
    def needs_cards(self) -> bool:
        """Whether its claims depend on the cluster's cards: a share of each card's memory
        (bytes differ per card size) or a choice of card types (written as product names)."""
        selector = self.plan.selector
        return bool(selector.use_types or selector.avoid_types) or any(
            r is not None and r.memory == 0 and r.memory_percent < 100 for r in self.plan.requests
        )


@dataclass(frozen=True, slots=True)
class PodClaims:
    """The templates the pod's claims need (to exist before the pod is admitted) and the
    webhook's answer."""

    templates: tuple[ClaimTemplate, ...]
    decision: AdmissionDecision


def screen_dra_pod(
    manifest: Mapping[str, Any], namespace: str, config: DraAdmissionConfig
) -> DraPod | AdmissionDecision:
    """The GPU pod being created in `namespace` to translate, or the final answer (no GPU,
    denied); never raises."""
    admission = config.admission
    screened = screen_pod(manifest, admission, any_scheduler=True)
    if isinstance(screened, AdmissionDecision):
        return without_scheduler_owned(manifest, screened)
    try:
        plan = plan_pod(screened.pod, admission.scheduling)
    except DomainError as exc:
        return AdmissionDecision(False, str(exc))
    if plan is None:  # every request is for zero GPUs: nothing to claim, nothing to keep
        spec = manifest["spec"]
        patch = [op for base, raw in container_slots(spec) for op in _removals(base, raw, config)]
        decision = AdmissionDecision(True, "pod asks for zero GPUs", tuple(patch))
        return without_scheduler_owned(manifest, decision)
    return DraPod(manifest, namespace or screened.pod.namespace, screened, plan)


def translate_pod(
    pod: DraPod, cards: Sequence[Device], config: DraAdmissionConfig
) -> PodClaims | AdmissionDecision:
    """The claims of `pod` against the cluster's `cards` (see `DraPod.needs_cards`): the
    templates and the patch, or a denial naming what cannot be written as a claim."""
    plan = pod.plan
    try:
        whole = plan_claim(plan, cards, config.driver, config.device_class or None)
    except DomainError as exc:
        return AdmissionDecision(False, f"cannot write the pod's GPU request as a claim: {exc}")
    whole = replace(whole, namespace=pod.namespace)
    asking = [(i, r) for i, r in enumerate(plan.requests) if r is not None]
    templates = {
        index: _template(whole, claim_request, asked)
        for (index, asked), claim_request in zip(asking, whole.requests, strict=True)
    }
    entries = _entries(pod, templates)
    added: dict[str, str] = {}
    for index, _ in asking:
        added.setdefault(entries[index], templates[index].claim.name)
    spec = pod.manifest["spec"]
    patch = append_patches(
        "/spec",
        spec,
        "resourceClaims",
        [{"name": e, "resourceClaimTemplateName": t} for e, t in added.items()],
    )
    for index, (base, raw) in enumerate(container_slots(spec)):
        patch += env_patches(base, raw, container_env(plan.requests[index], config.admission))
        patch += _removals(base, raw, config)
        if index in entries:
            claim = {"name": entries[index]}
            patch += append_patches(f"{base}/resources", raw["resources"], "claims", [claim])
    named = ", ".join(
        f"{plan.containers[i]} -> {entries[i]} ({templates[i].claim.name})" for i, _ in asking
    )
    message = f"GPU requests became claims: {named}"
    if spec.get("resourceClaims"):
        message += "; the pod's own claims are kept"
    decision = AdmissionDecision(True, message, tuple(patch))
    unique = tuple({t.key: t for t in templates.values()}.values())
    return PodClaims(unique, without_scheduler_owned(pod.manifest, decision))


def _removals(
    base: str, raw: Mapping[str, Any], config: DraAdmissionConfig
) -> list[dict[str, Any]]:
    """Remove vgpu's resources from the container's limits and requests: no node advertises
    them in DRA mode, so a pod keeping one would never be scheduled."""
    vendor = config.admission.scheduling.vendor
    resources = raw.get("resources")
    if not isinstance(resources, Mapping):
        return []
    found = []
    for field in ("limits", "requests"):
        present = resources.get(field)
        if isinstance(present, Mapping):
            found += [
                {"op": "remove", "path": f"{base}/resources/{field}/{escape(name)}"}
                for name in (*vendor.resources, vendor.priority_resource)
                if name in present
            ]
    return found


def _template(
    whole: ResourceClaim, request: DeviceRequest, asked: ContainerRequest
) -> ClaimTemplate:
    """The template of one container's request of `whole`, named by the hash of its spec."""
    constraints = tuple(
        replace(c, requests=(GPU_REQUEST,))
        for c in whole.constraints
        if c.requests == (request.name,)
    )
    claim = replace(
        whole, name="", requests=(replace(request, name=GPU_REQUEST),), constraints=constraints
    )
    spec = json.dumps(resource_claim_json(claim)["spec"], sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(spec.encode()).hexdigest()[:16]
    return ClaimTemplate(replace(claim, name=TEMPLATE_PREFIX + digest), _describe(asked))


def _describe(asked: ContainerRequest) -> str:
    gpus = f"{asked.count} GPU" + ("s" if asked.count > 1 else "")
    cores = f"{asked.cores}% of the cores" if asked.cores else "no core limit"
    return f"{gpus}, each {asked.describe_memory()} and {cores}"


def _entries(pod: DraPod, templates: Mapping[int, ClaimTemplate]) -> dict[int, str]:
    """The pod's claim entry each GPU container uses, by its position (init first). App
    containers first, so a plain init container can take the entry of one that asks the same."""
    plan = pod.plan
    spec = pod.manifest["spec"]
    taken = {
        entry.get("name")
        for entry in spec.get("resourceClaims") or []
        if isinstance(entry, Mapping)
    }
    sidecars = pod.screened.pod.init_progress.sidecars
    app_first = [*range(plan.init_count, len(plan.requests)), *range(plan.init_count)]
    entries: dict[int, str] = {}
    reusable: dict[str, str] = {}  # template name -> an entry no concurrent container uses
    for index in app_first:
        template = templates.get(index)
        if template is None:
            continue
        runs_alone = index < plan.init_count and index not in sidecars
        if runs_alone and template.claim.name in reusable:
            entries[index] = reusable[template.claim.name]
            continue
        entry = _entry_name(plan.containers[index], index, taken)
        taken.add(entry)
        entries[index] = entry
        if index not in sidecars:
            reusable.setdefault(template.claim.name, entry)
    return entries


def _entry_name(container: str, index: int, taken: set[Any]) -> str:
    """`vgpu-<container>`, else `vgpu-<index>` (a name too long, not a DNS label or taken),
    else `vgpu-<index>-<n>`."""
    candidates = [f"{ENTRY_PREFIX}{container}", f"{ENTRY_PREFIX}{index}"]
    candidates += [f"{ENTRY_PREFIX}{index}-{n}" for n in range(2, len(taken) + 3)]
    return next(c for c in candidates if _DNS_LABEL.fullmatch(c) and c not in taken)
