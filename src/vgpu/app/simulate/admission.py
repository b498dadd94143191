"""Run a new pod through the mutating webhook's decision, as the API server would."""

import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from vgpu.domain import (
    NVIDIA,
    AdmissionConfig,
    Budget,
    DomainError,
    Pod,
    PodPlan,
    PodPolicies,
    SchedulingConfig,
    Vendor,
    admit,
    plan_pod,
    pod_from_manifest,
)
from vgpu.domain.policy import pod_policies


def admit_pod(
    manifest: Mapping[str, Any], config: AdmissionConfig, budget: Budget
) -> tuple[dict[str, Any] | None, str]:
    """The pod as created (webhook patch applied), or None with the denial message."""
    decision = admit(manifest, config, budget)
    if not decision.allowed:
        return None, decision.message
    return apply_patch(manifest, decision.patch), decision.message


def apply_patch(document: Mapping[str, Any], patch: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Apply RFC 6902 `add` operations (all the webhook emits); `document` is left unchanged.

    Only the objects along each operation's path are copied; the rest is shared.
    """
    result: dict[str, Any] = dict(document)
    for operation in patch:
        if operation.get("op") != "add":
            raise ValueError(f"unsupported JSON patch op {operation.get('op')!r}")
        *parents, last = [_unescape(p) for p in str(operation["path"]).split("/")[1:]]
        target: Any = result
        for part in parents:
            key: Any = int(part) if isinstance(target, list) else part
            child = target[key]
            target[key] = child = list(child) if isinstance(child, list) else dict(child)
            target = child
        value = copy.deepcopy(operation["value"])
        if isinstance(target, list):
            target.insert(len(target) if last == "-" else int(last), value)
        else:
            target[last] = value
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


class Admissions:
    """What the webhook and the parser make of each arrival of one workload, remembered.

    Every policy pair's run (and the typical request) admits the same arrivals. Admission and
    the parsed requests depend on the manifest and the namespace's budget only; the pair's
    default policies are applied per call, so one memo serves every run.
    """

    def __init__(self, vendor: Vendor = NVIDIA) -> None:
        self._scheduling = SchedulingConfig(vendor=vendor)
        self._admission = AdmissionConfig(scheduling=self._scheduling)
        self._seen: dict[tuple[int, Budget], tuple[Pod, PodPlan] | str] = {}

    def plan(
        self, index: int, manifest: Mapping[str, Any], budget: Budget, policies: PodPolicies
    ) -> PodPlan | str:
        """Arrival `index`'s plan under these default policies, or why it was not created."""
        seen = self._seen.get((index, budget))
        if seen is None:
            seen = self._seen[(index, budget)] = self._admit(manifest, budget)
        if isinstance(seen, str):
            return seen
        pod, plan = seen
        return replace(plan, policies=pod_policies(pod.annotations, policies))

    def _admit(self, manifest: Mapping[str, Any], budget: Budget) -> tuple[Pod, PodPlan] | str:
        created, message = admit_pod(manifest, self._admission, budget)
        if created is None:
            return message
        try:
            pod = pod_from_manifest(created)
            plan = plan_pod(pod, self._scheduling)
        except DomainError as exc:  # admission lets through what it cannot read; count it
            return str(exc)
        return "pod asks for no GPU" if plan is None else (pod, plan)
