"""The realized MIG instances of a pod, from `hami.io/vgpu-mig-allocations` (contracts.md 12.5).

The annotation is a JSON array with one object per MIG device; the scheduler writes
`containerIndex` (init containers first), `deviceIndex`, `gpuUUID`, `profile` and `placement`,
and the device plugin adds `migUUID`, `gpuInstanceID` and `computeInstanceID` once it has
created the instance. Only entries with all three runtime fields count as realized.
"""

import json
import logging
from dataclasses import dataclass
from typing import Any

from vgpu.domain.pod import Pod

log = logging.getLogger(__name__)

MIG_ALLOCATIONS = "hami.io/vgpu-mig-allocations"


@dataclass(frozen=True, slots=True)
class MigInstance:
    container: str
    device_index: int
    gpu_uuid: str
    profile: str
    mig_uuid: str
    gpu_instance: int
    compute_instance: int


def realized_instances(pod: Pod) -> list[MigInstance]:
    """The pod's realized MIG instances; a malformed annotation is logged and gives none."""
    text = pod.annotations.get(MIG_ALLOCATIONS)
    if not text:
        return []
    try:
        entries = json.loads(text)
        if not isinstance(entries, list):
            raise ValueError(f"expected a JSON array, got {type(entries).__name__}")
        return [i for i in (_instance(pod, e) for e in entries) if i is not None]
    except (ValueError, TypeError, KeyError) as err:
        log.warning("pod %s: ignoring annotation %s: %s", pod.key, MIG_ALLOCATIONS, err)
        return []


def _instance(pod: Pod, entry: Any) -> MigInstance | None:
    if not isinstance(entry, dict):
        raise ValueError(f"an entry must be an object, got {entry!r}")
    if not entry.get("migUUID") or None in (
        entry.get("gpuInstanceID"),
        entry.get("computeInstanceID"),
    ):
        return None  # not realized yet
    index = _int(entry, "containerIndex")
    if not 0 <= index < len(pod.containers):
        raise ValueError(f"containerIndex {index} names no container of the pod")
    return MigInstance(
        container=pod.containers[index].name,
        device_index=_int(entry, "deviceIndex"),
        gpu_uuid=str(entry["gpuUUID"]),
        profile=str(entry["profile"]),
        mig_uuid=str(entry["migUUID"]),
        gpu_instance=_int(entry, "gpuInstanceID"),
        compute_instance=_int(entry, "computeInstanceID"),
    )


def _int(entry: dict[str, Any], name: str) -> int:
    value = entry.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
    return value
