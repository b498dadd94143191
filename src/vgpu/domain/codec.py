"""HAMi's annotation formats, byte-compatible in both directions.

Node devices (`hami.io/node-nvidia-register`): HAMi v2.8+ writes a JSON array; v2.4 wrote CSV
with 7 fields per card and v2.5-v2.7 CSV with 9. All three are read; JSON is written, with
v2.10's `migProfiles` on cards in MIG mode.

Pod grants (`hami.io/vgpu-devices-to-allocate` / `-allocated`): `UUID,VENDOR,mem,cores:` per
card, `;` after every container, empty segments kept so container indexes line up.
"""

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from vgpu.domain.device import HAMI_CORE_MODE, Device
from vgpu.domain.errors import CodecError, brief
from vgpu.domain.grant import ContainerGrant, DeviceGrant, PodGrants
from vgpu.domain.hostile_text import read_json, whole_number
from vgpu.domain.mig.allocations import MigReservation
from vgpu.domain.mig.profiles import MigPlacement, MigProfile
from vgpu.domain.vendor import NVIDIA

REGISTER = NVIDIA.register_annotation
GRANTS = NVIDIA.allocated_annotation
_INT32 = (-(2**31), 2**31 - 1)
_UINT32 = 2**32 - 1
_ID_SEPARATORS = frozenset(",:;")


def encode_node_devices(devices: Sequence[Device]) -> str:
    """HAMi's JSON form: Go's key order, zero values omitted (Go `omitempty`)."""
    return json.dumps([_device_json(d) for d in devices], separators=(",", ":"), ensure_ascii=False)


def _device_json(device: Device) -> dict[str, Any]:
    fields: list[tuple[str, Any]] = [
        ("id", device.uuid),
        ("index", device.index),
        ("count", device.count),
        ("devmem", device.memory),
        ("devcore", device.cores),
        ("type", device.type),
        ("numa", device.numa),
        ("mode", device.mode),
        ("migProfiles", [_profile_json(p) for p in device.mig_profiles]),
        ("health", device.healthy),
    ]
    return {key: value for key, value in fields if value}


def _profile_json(profile: MigProfile) -> dict[str, Any]:
    """HAMi's MigProfile: every key written, zero or not."""
    return {
        "name": profile.name,
        "memoryMB": profile.memory_mib,
        "core": profile.core,
        "sliceCount": profile.slices,
        "placements": [{"start": p.start, "size": p.size} for p in profile.placements],
    }


def decode_node_devices(text: str, annotation: str = REGISTER) -> list[Device]:
    """Cards from any HAMi register format; CodecError names what is wrong and where.

    A card id must be usable inside a grant, so one holding a grant separator, whitespace or a
    control character is refused, and so is an id listed twice: either would let one card be
    read as another, or the same card be granted twice to one container. An empty value is
    refused too (as HAMi refuses it): no device plugin writes one, since a node without GPUs
    registers `[]`, so it is a damaged annotation, not a node without GPUs.
    """
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        devices = _decode_json_devices(stripped, annotation)
    elif stripped == "":
        raise CodecError(
            annotation, "whole value", "empty (a device plugin with no GPUs registers [])"
        )
    else:
        devices = _decode_csv_devices(stripped, annotation)
    _refuse_repeated_ids([d.uuid for d in devices], annotation, "device")
    return devices


def _check_card_id(uuid: str, annotation: str, where: str) -> None:
    if not uuid:
        raise CodecError(annotation, where, "empty card id")
    bad = next((c for c in uuid if c in _ID_SEPARATORS or c.isspace() or not c.isprintable()), "")
    if bad:
        raise CodecError(
            annotation, where, f"card id {brief(uuid)} contains {bad!r}, which ids may not hold"
        )


def _refuse_repeated_ids(uuids: Sequence[str], annotation: str, what: str) -> None:
    first: dict[str, int] = {}
    for position, uuid in enumerate(uuids):
        if uuid in first:
            raise CodecError(
                annotation,
                f"{what} #{position}",
                f"card id {brief(uuid)} is already listed as {what} #{first[uuid]}",
            )
        first[uuid] = position


def _decode_json_devices(text: str, annotation: str) -> list[Device]:
    raw = read_json(text, annotation)
    if not isinstance(raw, list):
        raise CodecError(annotation, "top level", "expected a JSON array of devices")
    return [_device_from_json(item, i, annotation) for i, item in enumerate(raw)]


def _device_from_json(item: Any, position: int, annotation: str) -> Device:
    where = f"device #{position}"
    if not isinstance(item, dict):
        raise CodecError(annotation, where, f"expected an object, got {brief(item)}")
    uuid = item.get("id")
    if not isinstance(uuid, str) or not uuid:
        raise CodecError(annotation, where, "missing the card id")
    _check_card_id(uuid, annotation, where)
    where = f"device #{position} ({uuid})"

    def number(key: str, low: int = 0) -> int:
        value = item.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= _INT32[1]:
            raise CodecError(annotation, where, f"{key}={brief(value)} is not a valid number")
        return value

    def text_field(key: str) -> str:
        value = item.get(key, "")
        if not isinstance(value, str):
            raise CodecError(annotation, where, f"{key}={brief(value)} is not a string")
        return value

    health = item.get("health", False)
    if not isinstance(health, bool):
        raise CodecError(annotation, where, f"health={brief(health)} is not true or false")
    numa = item.get("numa", 0)
    if isinstance(numa, bool) or not isinstance(numa, int):
        raise CodecError(annotation, where, f"numa={brief(numa)} is not a valid number")
    return Device(
        uuid=uuid,
        index=number("index"),
        type=text_field("type"),
        count=number("count"),
        memory=number("devmem"),
        cores=number("devcore"),
        numa=max(numa, 0),
        healthy=health,
        # A missing mode stays "" as in HAMi (Go's zero value), so it re-encodes byte for
        # byte; "" is a substring of every `nvidia.com/vgpu-mode` value, so any pod accepts it.
        mode=text_field("mode"),
        mig_profiles=_profiles_from_json(item.get("migProfiles"), annotation, where),
    )


def _profiles_from_json(raw: Any, annotation: str, where: str) -> tuple[MigProfile, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise CodecError(annotation, where, f"migProfiles={brief(raw)} is not a list")
    profiles = []
    for position, item in enumerate(raw):
        here = f"{where}, migProfiles #{position}"
        if not isinstance(item, dict):
            raise CodecError(annotation, here, f"expected an object, got {brief(item)}")
        name = item.get("name", "")
        if not isinstance(name, str) or not name:
            raise CodecError(annotation, here, f"name={brief(name)} is not a profile name")
        placements = item.get("placements") or []
        if not isinstance(placements, list):
            raise CodecError(annotation, here, f"placements={brief(placements)} is not a list")
        profiles.append(
            MigProfile(
                name=name,
                slices=_json_int(item, "sliceCount", annotation, here),
                memory_mib=_json_int(item, "memoryMB", annotation, here),
                core=_json_int(item, "core", annotation, here),
                placements=tuple(_placement(p, annotation, here) for p in placements),
            )
        )
    return tuple(profiles)


def _placement(raw: Any, annotation: str, where: str) -> MigPlacement:
    if not isinstance(raw, dict):
        raise CodecError(annotation, where, f"placement {brief(raw)} is not an object")
    start = _json_int(raw, "start", annotation, where)
    size = _json_int(raw, "size", annotation, where)
    if size < 1:
        raise CodecError(annotation, where, f"placement at {start} has size {size}")
    return MigPlacement(start, size)


def _json_int(item: dict[str, Any], key: str, annotation: str, where: str) -> int:
    value = item.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _UINT32:
        raise CodecError(annotation, where, f"{key}={brief(value)} is not a valid number")
    return value


def _decode_csv_devices(text: str, annotation: str) -> list[Device]:
    if ":" not in text:
        raise CodecError(annotation, "whole value", "neither JSON nor CSV (no ':' separator)")
    devices = []
    for position, segment in enumerate(s for s in text.split(":") if s):
        fields = segment.split(",")
        where = f"device #{position}"
        if len(fields) not in (7, 9):
            raise CodecError(annotation, where, f"expected 7 or 9 fields, got {len(fields)}")
        uuid, count, memory, cores, dtype, numa, health = fields[:7]
        index, mode = (fields[7], fields[8]) if len(fields) == 9 else ("0", HAMI_CORE_MODE)
        _check_card_id(uuid, annotation, where)
        where = f"device #{position} ({uuid})"
        if health not in ("true", "false"):
            raise CodecError(annotation, where, f"health={brief(health)} is not true or false")
        devices.append(
            Device(
                uuid=uuid,
                index=_csv_int(index, "index", annotation, where),
                type=dtype,
                count=_csv_int(count, "count", annotation, where),
                memory=_csv_int(memory, "devmem", annotation, where),
                cores=_csv_int(cores, "devcore", annotation, where),
                numa=max(_csv_int(numa, "numa", annotation, where, low=_INT32[0]), 0),
                healthy=health == "true",
                mode=mode,
            )
        )
    return devices


def _csv_int(text: str, name: str, annotation: str, where: str, low: int = 0) -> int:
    try:
        return whole_number(text, low, _INT32[1])
    except ValueError as exc:
        raise CodecError(annotation, where, f"{name}={brief(text)} {exc}") from None


def encode_pod_grants(grants: PodGrants) -> str:
    """`UUID,VENDOR,mem,cores:` per card, `;` after each container (empty ones included)."""
    return "".join(
        "".join(f"{g.uuid},{g.vendor},{g.memory},{g.cores}:" for g in container) + ";"
        for container in grants
    )


def encode_node_devices_csv(devices: Sequence[Device]) -> str:
    """HAMi's legacy CSV form (its EncodeNodeDevices, read by v2.5-v2.7 schedulers):
    `id,count,devmem,devcore,type,numa,health,index,mode:` per card. MIG profiles have no
    place in it.

    >>> encode_node_devices_csv([Device("GPU-a", 1, "NVIDIA-Tesla P4", 10, 7680)])
    'GPU-a,10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:'
    """
    return "".join(
        f"{d.uuid},{d.count},{d.memory},{d.cores},{d.type},{d.numa},"
        f"{str(d.healthy).lower()},{d.index},{d.mode}:"
        for d in devices
    )


def encode_mig_profiles(profiles: Sequence[MigProfile]) -> str:
    """A card's `migProfiles` list as HAMi writes it inside the register annotation: compact
    JSON, every key of each profile written.

    >>> encode_mig_profiles([MigProfile("1g.5gb", 1, 4864, 15, (MigPlacement(6, 1),))])
    '[{"name":"1g.5gb","memoryMB":4864,"core":15,"sliceCount":1,"placements":[{"start":6,"size":1}]}]'
    """
    return json.dumps([_profile_json(p) for p in profiles], separators=(",", ":"))


def decode_mig_profiles(text: str, annotation: str = REGISTER) -> tuple[MigProfile, ...]:
    """Inverse of `encode_mig_profiles`; CodecError names the profile at fault."""
    return _profiles_from_json(read_json(text, annotation), annotation, "value")


def encode_vendor_grants(container: ContainerGrant, vendor: str) -> str:
    """One container's grants of one vendor, `:`-separated without a trailing one (HAMi's
    EncodeContainerDeviceType); the other vendors' grants are left out.

    >>> a, b = DeviceGrant("GPU-a", "NVIDIA", 1000, 10), DeviceGrant("GPU-b", "AMD", 2000, 20)
    >>> encode_vendor_grants((a, b, a), "NVIDIA")
    'GPU-a,NVIDIA,1000,10:GPU-a,NVIDIA,1000,10'
    """
    return ":".join(
        f"{g.uuid},{g.vendor},{g.memory},{g.cores}" for g in container if g.vendor == vendor
    )


def decode_pod_grants(
    text: str, annotation: str = GRANTS, mig: Sequence[MigReservation] = ()
) -> PodGrants:
    """Inverse of `encode_pod_grants`; CodecError for any malformed card entry. The vendor
    field is read as written, empty included (as HAMi reads it): the usage counts whatever the
    vendor, and the device plugin serves only grants of its own vendor.

    A container names each card once, except that in MIG mode one card may hold several of its
    MIG devices (HAMi v2.10): a repeat is read only where `mig`, the pod's
    `hami.io/vgpu-mig-allocations`, gives every appearance of the card its own placement, none
    overlapping another. Any other repeat would let one slice be served or counted twice.
    """
    if text == "":
        return ()
    segments = text.split(";")
    if segments[-1] == "":
        segments.pop()
    reserved = {r.key: r for r in mig}
    return tuple(
        _decode_container(segment, i, annotation, reserved) for i, segment in enumerate(segments)
    )


def _decode_container(
    segment: str,
    container: int,
    annotation: str,
    reserved: Mapping[tuple[int, int], MigReservation],
) -> ContainerGrant:
    grants = []
    for position, entry in enumerate(e for e in segment.split(":") if e):
        where = f"container #{container}, card #{position}"
        fields = entry.split(",")
        if len(fields) != 4:
            raise CodecError(
                annotation, where, f"expected UUID,VENDOR,MEM,CORES, got {brief(entry)}"
            )
        uuid, vendor, memory, cores = fields
        _check_card_id(uuid, annotation, where)
        grants.append(
            DeviceGrant(  # interned: every grant on a card names the same card and vendor
                uuid=sys.intern(uuid),
                vendor=sys.intern(vendor),
                memory=_csv_int(memory, "memory", annotation, where),
                cores=_csv_int(cores, "cores", annotation, where),
            )
        )
    if len(grants) > 1:
        _refuse_repeated_cards(grants, container, annotation, reserved)
    return tuple(grants)


def _refuse_repeated_cards(
    grants: Sequence[DeviceGrant],
    container: int,
    annotation: str,
    reserved: Mapping[tuple[int, int], MigReservation],
) -> None:
    """CodecError for a card named twice in the container, unless each appearance so far is a
    MIG device reserved on that card at a placement of its own."""
    seen: dict[str, tuple[int, int]] = {}  # card -> first position, slices its devices reserve
    for position, grant in enumerate(grants):
        slices = _reserved_slices(reserved.get((container, position)), grant.uuid)
        if grant.uuid not in seen:
            seen[grant.uuid] = (position, slices)
            continue
        first, taken = seen[grant.uuid]
        where = f"container #{container}, card #{position}"
        if not (taken and slices):
            raise CodecError(
                annotation,
                where,
                f"card id {brief(grant.uuid)} is already listed as container #{container}, "
                f"card #{first} (a card repeats only as MIG devices with reservations of their "
                "own)",
            )
        if taken & slices:
            raise CodecError(
                annotation,
                where,
                f"card id {brief(grant.uuid)} is already listed as container #{container}, "
                f"card #{first}, and their MIG reservations overlap",
            )
        seen[grant.uuid] = (first, taken | slices)


def _reserved_slices(reservation: MigReservation | None, uuid: str) -> int:
    """The slices `reservation` holds on card `uuid`; 0 when it is on another card or none."""
    if reservation is None or reservation.gpu_uuid != uuid or not reservation.placement.fits_mask:
        return 0
    return reservation.placement.mask
