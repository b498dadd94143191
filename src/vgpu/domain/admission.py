"""The mutating webhook's decision for a pod: leave it, take it (with a JSON patch), or deny.

Follows HAMi v2.10 (docs/protocol.md#admission-webhook) and fixes what it gets wrong: invalid
quantities and privileged GPU containers are denied with a message instead of being left
Pending forever, and the annotations and label that make a pod hold a card are removed from
every pod admitted, GPU or not (`trust.scheduler_owned` says which), so no tenant can bring its
own.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu.domain.decision import SchedulingConfig
from vgpu.domain.device import Usage
from vgpu.domain.errors import DomainError
from vgpu.domain.json_patch import container_slots, env_patches, escape
from vgpu.domain.pod import Container, Pod, pod_from_manifest
from vgpu.domain.quota import UNLIMITED, Budget
from vgpu.domain.request import ContainerRequest, asks_for_gpu, parse_request
from vgpu.domain.trust.scheduler_owned import (
    is_scheduler_owned_annotation,
    is_scheduler_owned_label,
)

DEFAULT_SCHEDULER = "default-scheduler"


@dataclass(frozen=True, slots=True)
class AdmissionConfig:
    """What the admission webhook does to a GPU pod: the scheduler it sends the pod to, the
    request defaults and resource names (`scheduling`), HAMi's `GPU_CORE_UTILIZATION_POLICY`
    env, whether GPU-less containers get `NVIDIA_VISIBLE_DEVICES=none`, the runtime class to
    set where the pod names none, and whether pods of `default-scheduler` are taken over."""

    scheduler_name: str = "vgpu-scheduler"
    scheduling: SchedulingConfig = field(default_factory=SchedulingConfig)
    gpu_core_policy: str = ""  # "", "force" or "disable": GPU_CORE_UTILIZATION_POLICY
    overwrite_env: bool = False  # give GPU-less containers NVIDIA_VISIBLE_DEVICES=none
    runtime_class: str = ""
    force_overwrite_default_scheduler: bool = True


@dataclass(frozen=True, slots=True)
class AdmissionDecision:
    """`allowed` with a JSON patch (RFC 6902 operations), or denied with `message`."""

    allowed: bool
    message: str = ""
    patch: tuple[dict[str, Any], ...] = ()

    @property
    def mutates(self) -> bool:
        """Whether the answer changes the pod (a non-empty patch)."""
        return bool(self.patch)


def admit(
    manifest: Mapping[str, Any], config: AdmissionConfig, budget: Budget = UNLIMITED
) -> AdmissionDecision:
    """Decide what to do with a pod being created. Never raises for bad pod content."""
    return without_scheduler_owned(manifest, _decide(manifest, config, budget))


def without_scheduler_owned(
    manifest: Mapping[str, Any], decision: AdmissionDecision
) -> AdmissionDecision:
    """`decision`, when it admits the pod, with the scheduler-owned annotations and labels the
    pod carries removed first (every pod admitted loses them, GPU or not)."""
    removals = _scheduler_owned_removals(manifest)
    if not decision.allowed or not removals:
        return decision
    removed = "; ".join(f"{field} {', '.join(keys)}" for field, keys in removals.items())
    patch = tuple(
        {"op": "remove", "path": f"/metadata/{field}/{escape(key)}"}
        for field, keys in removals.items()
        for key in keys
    )
    return AdmissionDecision(
        True,
        f"{decision.message}; removed scheduler-owned {removed}",
        (*patch, *decision.patch),
    )


@dataclass(frozen=True, slots=True)
class GpuPod:
    """A pod being created that asks for GPUs, read: each container's request (init
    containers first, as in `pod.containers`), None where it asks for none."""

    pod: Pod
    requests: tuple[ContainerRequest | None, ...]


def screen_pod(
    manifest: Mapping[str, Any], config: AdmissionConfig, *, any_scheduler: bool = False
) -> GpuPod | AdmissionDecision:
    """The checks every GPU pod passes whichever mode serves it: a pod spec with containers,
    quantities that read, no privileged GPU container, no node assigned yet. A decision
    when the pod is done with here (denied, left to another scheduler, or asking for no GPU:
    then admitted with the GPU-less containers' patches); `any_scheduler` takes pods of
    every scheduler (claims do not depend on which one places the pod)."""
    spec = manifest.get("spec") or {}
    if not isinstance(spec, Mapping):
        return AdmissionDecision(False, "pod spec must be an object")
    if not spec.get("containers"):
        return AdmissionDecision(False, "pod has no containers")
    current = spec.get("schedulerName") or ""
    if (
        not any_scheduler
        and current not in ("", config.scheduler_name)
        and not (current == DEFAULT_SCHEDULER and config.force_overwrite_default_scheduler)
    ):
        return AdmissionDecision(True, f"pod uses scheduler {current!r}; left alone")
    try:
        pod = pod_from_manifest(manifest)
    except DomainError as exc:
        return AdmissionDecision(False, str(exc))
    vendor = config.scheduling.vendor
    if not any(asks_for_gpu(c, vendor) for c in pod.containers):
        return AdmissionDecision(True, "pod asks for no GPU", _env_none_patches(spec, config))
    try:
        requests = [parse_request(c, vendor, config.scheduling.defaults) for c in pod.containers]
    except DomainError as exc:
        return AdmissionDecision(False, str(exc))
    for container, request in zip(pod.containers, requests, strict=True):
        if container.privileged and request is not None:
            return AdmissionDecision(
                False,
                f"container {container.name!r} is privileged and asks for GPU slices: a "
                "privileged container sees every GPU and escapes its limits; drop privileged "
                "or the GPU request",
            )
    if pod.node_name:
        return AdmissionDecision(
            False,
            f"pod has node {pod.node_name!r} assigned already; "
            f"it cannot be scheduled by {config.scheduler_name}",
        )
    return GpuPod(pod, tuple(requests))


def _decide(
    manifest: Mapping[str, Any], config: AdmissionConfig, budget: Budget
) -> AdmissionDecision:
    screened = screen_pod(manifest, config)
    if isinstance(screened, AdmissionDecision):
        return screened
    pod, requests = screened.pod, screened.requests
    charge = _admission_charge(requests, pod.init_count)
    if not budget.allows(charge):
        return AdmissionDecision(
            False,
            f"exceeding resource quota in namespace {pod.namespace}: {budget.shortfall(charge)}",
        )
    spec = manifest["spec"]
    patch: list[dict[str, Any]] = [
        {"op": "add", "path": "/spec/schedulerName", "value": config.scheduler_name}
    ]
    if config.runtime_class and not spec.get("runtimeClassName"):
        patch.append({"op": "add", "path": "/spec/runtimeClassName", "value": config.runtime_class})
    for (base, raw), container, request in zip(
        container_slots(spec), pod.containers, requests, strict=True
    ):
        patch.extend(_container_patches(base, raw, container, request, config))
    return AdmissionDecision(True, "pod sent to " + config.scheduler_name, tuple(patch))


def _admission_charge(requests: Sequence[ContainerRequest | None], init_count: int) -> Usage:
    """What the pod will cost at least; percentages are resolved later, on the chosen card."""

    def cost(request: ContainerRequest | None) -> Usage:
        if request is None:
            return Usage()
        n = request.count
        return Usage(slices=n, memory=request.memory * n, cores=request.cores * n)

    app = Usage()
    for request in requests[init_count:]:
        app = app + cost(request)
    for request in requests[:init_count]:
        app = app.union(cost(request))
    return app


def _container_patches(
    base: str,
    raw: Mapping[str, Any],
    container: Container,
    request: ContainerRequest | None,
    config: AdmissionConfig,
) -> list[dict[str, Any]]:
    vendor = config.scheduling.vendor
    env = container_env(request, config)
    if request is None:
        return env_patches(base, raw, env)
    limits: dict[str, Any] = {}
    values = {**container.requests, **container.limits}
    if vendor.count_resource not in values:
        limits[vendor.count_resource] = str(request.count)
    whole_card = vendor.memory_resource not in values and request.memory_percent in (0, 100)
    if vendor.cores_resource not in values and whole_card and request.memory == 0:
        limits[vendor.cores_resource] = "100"
    return env_patches(base, raw, env) + _limit_patches(base, raw, limits)


def container_env(request: ContainerRequest | None, config: AdmissionConfig) -> dict[str, str]:
    """The variables the webhook gives a container: HAMi-core's task priority and core
    policy to one that asks for GPUs; `NVIDIA_VISIBLE_DEVICES=none` to one that does not,
    with `overwrite_env`."""
    if request is None:
        return {"NVIDIA_VISIBLE_DEVICES": "none"} if config.overwrite_env else {}
    env = {}
    if request.priority is not None:
        env["CUDA_TASK_PRIORITY"] = str(request.priority)
    if config.gpu_core_policy in ("force", "disable"):
        env["GPU_CORE_UTILIZATION_POLICY"] = config.gpu_core_policy
    return env


def _env_none_patches(
    spec: Mapping[str, Any], config: AdmissionConfig
) -> tuple[dict[str, Any], ...]:
    if not config.overwrite_env:
        return ()
    none = {"NVIDIA_VISIBLE_DEVICES": "none"}
    return tuple(op for base, raw in container_slots(spec) for op in env_patches(base, raw, none))


def _limit_patches(
    base: str, raw: Mapping[str, Any], limits: Mapping[str, Any]
) -> list[dict[str, Any]]:
    if not limits:
        return []
    resources = raw.get("resources")
    if not resources:
        return [{"op": "add", "path": f"{base}/resources", "value": {"limits": dict(limits)}}]
    if not resources.get("limits"):
        return [{"op": "add", "path": f"{base}/resources/limits", "value": dict(limits)}]
    return [
        {"op": "add", "path": f"{base}/resources/limits/{escape(name)}", "value": value}
        for name, value in limits.items()
    ]


def _scheduler_owned_removals(manifest: Mapping[str, Any]) -> dict[str, list[str]]:
    """The scheduler-owned keys present, by metadata field; empty when there are none."""
    meta = manifest.get("metadata")
    if not isinstance(meta, Mapping):
        return {}
    found: dict[str, list[str]] = {}
    for field_name, owned in (
        ("annotations", is_scheduler_owned_annotation),
        ("labels", is_scheduler_owned_label),
    ):
        present = meta.get(field_name)
        if isinstance(present, Mapping):
            keys = [k for k in present if isinstance(k, str) and owned(k)]
            if keys:
                found[field_name] = keys
    return found
