"""What a node's device plugin served, in the file it keeps on the host across restarts.

A tenant can rewrite its pod's annotations after it has been served (garble the signature, set
`hami.io/bind-phase: failed`, drop the grant); the plugin must go on counting what it handed
out until the pod ends. So, before it answers an Allocate, it records the grant it served, with
enough to decode it again (the allocated device list byte for byte, the signed MIG reservations
with the identity of the instances it made), in a JSON file only it writes:

>>> grant = ServedGrant("uid-1", "default/train", "GPU-a,NVIDIA,3000,30:;", served_at="2026-01-02")
>>> text = encode_served_record("gpu-node-1", [grant])
>>> json.loads(text)["pods"]["uid-1"]["allocated"]
'GPU-a,NVIDIA,3000,30:;'
>>> decode_served_record(text) == ("gpu-node-1", [grant])
True
>>> grant.footprint()["GPU-a"]
Usage(slices=1, memory=3000, cores=30)
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vgpu.domain.device import Usage
from vgpu.domain.errors import DomainError
from vgpu.domain.grant import PodGrants, pod_footprint
from vgpu.domain.mig.allocations import decode_mig_allocations
from vgpu.domain.mig.grants import decode_granted

VERSION = 1


class ServedRecordError(DomainError):
    """The served record's text is not what the plugin writes: which entry, which field, why."""


@dataclass(frozen=True, slots=True)
class ServedGrant:
    """One pod's grant as the plugin served it.

    `allocated` is `hami.io/vgpu-devices-allocated` and `mig_reservations` the signed part of
    `hami.io/vgpu-mig-allocations` when it was served, with the runtime identity of each MIG
    instance served so far; `signed`: the grant's signature verified
    (False: believed unsigned, from HAMi's scheduler or with signing off); `served_at` is UTC,
    RFC 3339.
    """

    pod_uid: str
    pod: str  # namespace/name, for people and logs
    allocated: str
    mig_reservations: str = ""
    init_containers: int = 0
    signed: bool = True
    served_at: str = ""

    def grants(self) -> PodGrants:
        """The served grants, MIG instances attached; ServedRecordError when they do not read."""
        try:
            reservations = decode_mig_allocations(self.mig_reservations)
            return decode_granted(self.allocated, reservations)
        except DomainError as exc:
            raise ServedRecordError(f"pod {self.pod} ({self.pod_uid}): {exc}") from None

    def footprint(self) -> dict[str, Usage]:
        """What the pod holds on each card at its peak (see `pod_footprint`)."""
        return pod_footprint(self.grants(), self.init_containers)


def encode_served_record(node: str, grants: Sequence[ServedGrant]) -> str:
    """The file's text: compact JSON, pods by uid in the order given; defaults left out."""
    pods = {}
    for grant in grants:
        entry: dict[str, Any] = {"pod": grant.pod, "allocated": grant.allocated}
        if grant.mig_reservations:
            entry["mig_reservations"] = grant.mig_reservations
        if grant.init_containers:
            entry["init_containers"] = grant.init_containers
        if not grant.signed:
            entry["signed"] = False
        entry["served_at"] = grant.served_at
        pods[grant.pod_uid] = entry
    record = {"version": VERSION, "node": node, "pods": pods}
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def decode_served_record(text: str) -> tuple[str, list[ServedGrant]]:
    """The node and the grants of a record file; ServedRecordError names what is wrong. Every
    grant must decode, so a damaged file is noticed at once, not when a pod is counted."""
    try:
        record = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ServedRecordError(f"not JSON: {exc}") from None
    if not isinstance(record, dict):
        raise ServedRecordError(f"must be a JSON object, not {type(record).__name__}")
    if record.get("version") != VERSION:
        raise ServedRecordError(f"version {record.get('version')!r} is not {VERSION}")
    node = record.get("node")
    pods = record.get("pods")
    if not isinstance(node, str) or not isinstance(pods, dict):
        raise ServedRecordError("needs a string 'node' and an object 'pods'")
    grants = [_grant(uid, entry) for uid, entry in pods.items()]
    for grant in grants:
        grant.grants()
    return node, grants


def _grant(uid: str, entry: Any) -> ServedGrant:
    if not isinstance(entry, dict):
        raise ServedRecordError(f"pods.{uid}: must be an object")
    texts = {key: entry.get(key, "") for key in ("pod", "allocated", "mig_reservations")}
    for key, value in [*texts.items(), ("served_at", entry.get("served_at", ""))]:
        if not isinstance(value, str):
            raise ServedRecordError(f"pods.{uid}.{key}: must be a string, not {value!r:.40}")
    init = entry.get("init_containers", 0)
    if isinstance(init, bool) or not isinstance(init, int) or not 0 <= init <= 1000:
        raise ServedRecordError(f"pods.{uid}.init_containers: {init!r:.40} is not 0-1000")
    signed = entry.get("signed", True)
    if not isinstance(signed, bool):
        raise ServedRecordError(f"pods.{uid}.signed: {signed!r:.40} is not true or false")
    if not uid or not texts["allocated"]:
        raise ServedRecordError(f"pods.{uid!r}: needs a pod uid and an allocated grant")
    return ServedGrant(
        uid,
        texts["pod"],
        texts["allocated"],
        texts["mig_reservations"],
        init,
        signed,
        entry.get("served_at", ""),
    )
