"""HTTP bodies: kube-scheduler's extender JSON and the API server's AdmissionReview.

kube-scheduler writes Go field names (`Pod`, `NodeNames`, ...) and Go reads them back without
regard to case, so keys are matched case-insensitively here too. Unknown keys and wrong types
are errors that name the field.
"""

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from vgpu.app.errors import one_line_problems
from vgpu.app.scheduler.preempt import NodeVictims, PreemptResult, Proposed
from vgpu.app.scheduler.service import FilterResult, PrioritizeResult
from vgpu.domain import DomainError, pod_from_manifest

BODY_LIMIT = 1 << 20  # 1 MiB, as HAMi reads at most


class BodyError(ValueError):
    """A request body that cannot be used; the message says why in a sentence."""


class _Open(BaseModel):
    """A Kubernetes object part: unknown keys are the API server's business, kept as given."""

    model_config = ConfigDict(extra="allow")


class NodeMeta(_Open):
    name: StrictStr = Field(min_length=1)
    annotations: dict[str, StrictStr] | None = None


class NodeItem(_Open):
    metadata: NodeMeta


class NodeList(_Open):
    items: list[NodeItem] | None = None


class ExtenderArgs(BaseModel):
    """kube-scheduler's filter and prioritize request."""

    model_config = ConfigDict(extra="forbid")

    Pod: dict[str, Any]
    Nodes: NodeList | None = None
    NodeNames: list[StrictStr] | None = None

    def node_objects(self) -> list[dict[str, Any]] | None:
        if self.Nodes is None:
            return None
        return [item.model_dump(exclude_unset=True) for item in self.Nodes.items or []]


class BindingArgs(BaseModel):
    """kube-scheduler's bind request."""

    model_config = ConfigDict(extra="forbid")

    PodName: StrictStr = Field(min_length=1)
    PodNamespace: StrictStr = Field(min_length=1)
    PodUID: StrictStr = ""
    Node: StrictStr = Field(min_length=1)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetaPod(_Strict):
    UID: StrictStr = Field(min_length=1)


class MetaVictims(_Strict):
    Pods: list[MetaPod] | None = None
    NumPDBViolations: int = Field(0, ge=0)


class Victims(_Strict):
    Pods: list[dict[str, Any]] | None = None
    NumPDBViolations: int = Field(0, ge=0)


class PreemptionArgs(_Strict):
    """kube-scheduler's preempt request: victims as whole pods, or (nodeCacheCapable) by UID."""

    Pod: dict[str, Any]
    NodeNameToVictims: dict[str, Victims | None] | None = None
    NodeNameToMetaVictims: dict[str, MetaVictims | None] | None = None

    def proposals(self) -> dict[str, NodeVictims]:
        """Both maps as one; BodyError names a victim pod that cannot be read."""
        proposals: dict[str, NodeVictims] = {}
        for node, meta in (self.NodeNameToMetaVictims or {}).items():
            pods = meta.Pods if meta is not None else None
            proposals[node] = NodeVictims(
                tuple(Proposed(p.UID) for p in pods or []),
                meta.NumPDBViolations if meta is not None else 0,
            )
        for node, victims in (self.NodeNameToVictims or {}).items():
            full = victims.Pods if victims is not None else None
            proposals[node] = NodeVictims(
                tuple(_proposed(node, i, p) for i, p in enumerate(full or [])),
                victims.NumPDBViolations if victims is not None else 0,
            )
        return proposals


def _proposed(node: str, position: int, manifest: dict[str, Any]) -> Proposed:
    where = f"NodeNameToVictims.{node}.Pods[{position}]"
    try:
        pod = pod_from_manifest(manifest)
    except DomainError as exc:
        raise BodyError(f"{where}: {exc}") from None
    if not pod.uid:
        raise BodyError(f"{where}: metadata.uid is missing")
    return Proposed(pod.uid, pod)


class AdmissionRequest(_Open):
    uid: StrictStr = Field(min_length=1)
    kind: dict[str, Any] | None = None
    namespace: StrictStr = ""
    operation: StrictStr = "CREATE"
    object: dict[str, Any] | None = None
    dryRun: StrictBool | None = None


class AdmissionReview(BaseModel):
    model_config = ConfigDict(extra="forbid")

    apiVersion: Literal["admission.k8s.io/v1", "admission.k8s.io/v1beta1"]
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


Model = TypeVar("Model", bound=BaseModel)


def decode(body: bytes, model: type[Model], *, fold_case: bool = False) -> Model:
    """Parse a JSON body into `model`; BodyError names the field and value that are wrong."""
    data = parse_json(body)
    if fold_case and isinstance(data, dict):
        data = _fold(data, model)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BodyError(f"{model.__name__}: " + one_line_problems(exc, "field ")) from None


def parse_json(body: bytes) -> Any:
    if not body.strip():
        raise BodyError("empty request body; a JSON object was expected")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "UTF-8" in exc.msg:
            raise BodyError("request body is not UTF-8 text") from None
        if "depth" in exc.msg:
            raise BodyError("request body is nested too deeply") from None
        if "infinity" in exc.msg:  # orjson reads numbers as int64 or double, and no further
            raise BodyError(
                f"request body holds a number too large to read at character {exc.pos}"
            ) from None
        raise BodyError(f"request body is not JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(data, dict):
        raise BodyError(f"request body must be a JSON object, not {type(data).__name__}")
    return data


def _fold(data: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    canonical = {name.lower(): name for name in model.model_fields}
    folded: dict[str, Any] = {}
    for key, value in data.items():
        name = canonical.get(key.lower(), key) if isinstance(key, str) else key
        if name in folded:
            raise BodyError(f"{model.__name__}: field {name} given twice (keys differ in case)")
        folded[name] = value
    return folded


# replies -------------------------------------------------------------------------------------
def filter_reply(result: FilterResult) -> dict[str, Any]:
    """ExtenderFilterResult with every key present, as Go writes it."""
    return {
        "Nodes": None
        if result.nodes is None
        else {"apiVersion": "v1", "kind": "NodeList", "items": result.nodes},
        "NodeNames": result.node_names,
        "FailedNodes": result.failed or None,
        "FailedAndUnresolvableNodes": None,
        "Error": result.error,
    }


def filter_error(message: str) -> dict[str, Any]:
    return filter_reply(FilterResult(error=message))


def prioritize_reply(result: PrioritizeResult) -> list[dict[str, Any]]:
    return [{"Host": host, "Score": score} for host, score in result.scores]


def preempt_reply(result: PreemptResult) -> dict[str, Any]:
    """ExtenderPreemptionResult: the nodes kept, their victims by UID."""
    return {
        "NodeNameToMetaVictims": {
            node: {
                "Pods": [{"UID": v.uid} for v in kept.victims],
                "NumPDBViolations": kept.pdb_violations,
            }
            for node, kept in result.nodes.items()
        }
    }


def bind_reply(error: str) -> dict[str, Any]:
    return {"Error": error}


def admission_reply(
    api_version: str,
    uid: str,
    *,
    allowed: bool,
    code: int,
    message: str = "",
    patch: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """controller-runtime's reply shapes: allow (200, maybe a JSONPatch), deny (403), error."""
    status: dict[str, Any] = {"code": code}
    if message:
        status["message"] = message
    if code == 403:
        status["reason"] = "Forbidden"
    elif code == 400:
        status["reason"] = "BadRequest"
    response: dict[str, Any] = {"uid": uid, "allowed": allowed, "status": status}
    if patch:
        text = json.dumps(list(patch), separators=(",", ":"))
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(text.encode()).decode()
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": response}
