"""Run a new pod through the mutating webhook's decision, as the API server would."""

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from vgpu.domain import AdmissionConfig, Budget, admit


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
