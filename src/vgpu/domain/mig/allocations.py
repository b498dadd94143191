"""`hami.io/vgpu-mig-allocations`: which MIG instance each MIG device of a pod is
(docs/protocol.md#mig-allocations). The scheduler writes the reservation (container, device,
GPU, profile, placement); the device plugin adds the runtime identity of the instance it made (MIG
UUID, GI id, CI id).

>>> text = '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"2g.10gb",'
>>> text += '"placement":{"start":2,"size":2}}]'
>>> (only,) = decode_mig_allocations(text)
>>> only.gpu_uuid, only.profile, only.placement, only.runtime
('GPU-a', '2g.10gb', MigPlacement(start=2, size=2), None)
>>> encode_mig_allocations([only]) == text
True
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from vgpu.domain.errors import CodecError, brief
from vgpu.domain.hostile_text import read_json
from vgpu.domain.mig.profiles import MigPlacement

MIG_ALLOCATIONS_ANNOTATION = "hami.io/vgpu-mig-allocations"
_UINT32 = 2**32 - 1
_MAX_TEXT = 64 * 1024  # a pod has at most a few dozen MIG devices; anything longer is hostile


@dataclass(frozen=True, slots=True)
class MigRuntime:
    """The instance the device plugin made for a reservation."""

    mig_uuid: str
    gpu_instance_id: int
    compute_instance_id: int


@dataclass(frozen=True, slots=True)
class MigReservation:
    """One MIG device of one container: `device_index` is its position in the container's
    grant list, `container_index` counts init containers first."""

    container_index: int
    device_index: int
    gpu_uuid: str
    profile: str
    placement: MigPlacement
    runtime: MigRuntime | None = None

    @property
    def key(self) -> tuple[int, int]:
        return (self.container_index, self.device_index)


def encode_mig_allocations(reservations: Sequence[MigReservation]) -> str:
    """HAMi's JSON, Go's key order, runtime fields only once known; "" when there are none."""
    if not reservations:
        return ""
    return json.dumps(
        [_reservation_json(r) for r in reservations], separators=(",", ":"), ensure_ascii=False
    )


def with_runtimes(text: str, runtimes: Mapping[tuple[int, int], MigRuntime]) -> str:
    """The reservations in `text` with the runtime identity `runtimes` gives each by (container,
    device); the others as they are. CodecError when `text` does not read.

    >>> one = '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb",'
    >>> one += '"placement":{"start":0,"size":1}}]'
    >>> made = with_runtimes(one, {(0, 0): MigRuntime("MIG-1", 7, 0)})
    >>> decode_mig_allocations(made)[0].runtime
    MigRuntime(mig_uuid='MIG-1', gpu_instance_id=7, compute_instance_id=0)
    """
    if not runtimes:
        return text
    return encode_mig_allocations(
        [replace(r, runtime=runtimes.get(r.key, r.runtime)) for r in decode_mig_allocations(text)]
    )


def _reservation_json(reservation: MigReservation) -> dict[str, Any]:
    item: dict[str, Any] = {
        "containerIndex": reservation.container_index,
        "deviceIndex": reservation.device_index,
        "gpuUUID": reservation.gpu_uuid,
        "profile": reservation.profile,
        "placement": {"start": reservation.placement.start, "size": reservation.placement.size},
    }
    if reservation.runtime is not None:
        item["migUUID"] = reservation.runtime.mig_uuid
        item["gpuInstanceID"] = reservation.runtime.gpu_instance_id
        item["computeInstanceID"] = reservation.runtime.compute_instance_id
    return item


def decode_mig_allocations(
    text: str, annotation: str = MIG_ALLOCATIONS_ANNOTATION
) -> tuple[MigReservation, ...]:
    """Inverse of `encode_mig_allocations`, with HAMi's rules: every entry complete, runtime
    fields all three or none, one entry per (container, device). CodecError otherwise."""
    if text == "":
        return ()
    if len(text) > _MAX_TEXT:
        raise CodecError(annotation, "whole value", f"{len(text)} characters is too long")
    raw = read_json(text, annotation)
    if not isinstance(raw, list):
        raise CodecError(annotation, "whole value", "not a JSON array")
    reservations = tuple(
        _reservation(item, f"entry #{i}", annotation) for i, item in enumerate(raw)
    )
    seen: set[tuple[int, int]] = set()
    for position, reservation in enumerate(reservations):
        if reservation.key in seen:
            container, device = reservation.key
            raise CodecError(
                annotation,
                f"entry #{position}",
                f"container {container} device {device} is reserved twice",
            )
        seen.add(reservation.key)
    return reservations


def _reservation(item: Any, where: str, annotation: str) -> MigReservation:
    if not isinstance(item, dict):
        raise CodecError(annotation, where, f"expected an object, got {brief(item)}")
    placement = item.get("placement")
    if not isinstance(placement, dict):
        raise CodecError(annotation, where, f"placement={brief(placement)} is not an object")
    size = _number(placement, "size", where, annotation)
    if size < 1:
        raise CodecError(annotation, where, "placement size is 0")
    reservation = MigReservation(
        container_index=_number(item, "containerIndex", where, annotation),
        device_index=_number(item, "deviceIndex", where, annotation),
        gpu_uuid=_text(item, "gpuUUID", where, annotation),
        profile=_text(item, "profile", where, annotation),
        placement=MigPlacement(_number(placement, "start", where, annotation), size),
    )
    # as Go reads it: an empty MIG UUID or a null id is absent
    present = [
        item.get("migUUID") not in (None, ""),
        item.get("gpuInstanceID") is not None,
        item.get("computeInstanceID") is not None,
    ]
    if not any(present):
        return reservation
    if not all(present):
        raise CodecError(annotation, where, "partial runtime identity (need all three fields)")
    runtime = MigRuntime(
        _text(item, "migUUID", where, annotation),
        _number(item, "gpuInstanceID", where, annotation),
        _number(item, "computeInstanceID", where, annotation),
    )
    return MigReservation(
        reservation.container_index,
        reservation.device_index,
        reservation.gpu_uuid,
        reservation.profile,
        reservation.placement,
        runtime,
    )


def _number(item: dict[str, Any], key: str, where: str, annotation: str) -> int:
    value = item.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _UINT32:
        raise CodecError(annotation, where, f"{key}={brief(value)} is not a number in 0..{_UINT32}")
    return value


def _text(item: dict[str, Any], key: str, where: str, annotation: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value or len(value) > 256:
        raise CodecError(annotation, where, f"{key}={brief(value)} is not a non-empty name")
    return value
