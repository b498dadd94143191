"""What the DRA driver prepared, in the file it keeps on the host across restarts.

Before the driver answers a Prepare it records the claim: its identity, every device share
(GPU, what it consumes), the CDI ids it returns and the CDI spec it wrote. A restarted driver
reads the record back, so prepared claims keep counting in the node's ledger, a Prepare
retried after the restart gets the same answer, and a spec the node lost (the runtime's CDI
directory is a tmpfs, emptied by a reboot) is written again.

>>> share = DeviceShare("gpu", "node-a", "gpu-0", "s1", "GPU-a", 4096 * 2**20, 30)
>>> claim = PreparedClaim("u1", "ml", "train", (share,), (("vgpu.io/claim=u1-gpu-0-s1",),),
...                       {"kind": "vgpu.io/claim"}, "2026-01-02T03:04:05Z")
>>> text = encode_prepared_record("node-a", "gpu.vgpu.io", [claim])
>>> decode_prepared_record(text) == ("node-a", "gpu.vgpu.io", [claim])
True
>>> claim.footprint()
{'GPU-a': Usage(slices=1, memory=4096, cores=30)}

Each prepared claim also leaves `claim.json` in its own directory on the host (never mounted
into a container): whose the directories are, for `vgpu monitor`, and everything the record
holds of the claim but its spec (which is the claim's CDI spec file). A record that does not
read, or is gone, is rebuilt from these files, so no prepared claim stops counting.

>>> info = encode_claim_info(claim, "gpu.vgpu.io")
>>> info["shares"][0]["directory"], info["shares"][0]["memoryLimitMiB"]
('s1', 4096)
>>> decode_claim_info("u1", json.dumps(info), claim.spec) == claim
True
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu.domain.device import Usage
from vgpu.domain.dra.limits import DeviceShare
from vgpu.domain.dra.model import ConsumerReference
from vgpu.domain.dra.node_ledger import shares_footprint
from vgpu.domain.errors import DomainError, brief

VERSION = 1
_MAX_TEXT = 253


class PreparedRecordError(DomainError):
    """The record's text is not what the driver writes: which entry, which field, why."""


@dataclass(frozen=True, slots=True)
class PreparedClaim:
    """One prepared claim: `cdi_ids` per share, in the shares' order; `spec` the CDI spec;
    `consumers` whom the claim was reserved for when it was prepared."""

    uid: str
    namespace: str
    name: str
    shares: tuple[DeviceShare, ...]
    cdi_ids: tuple[tuple[str, ...], ...]
    spec: Mapping[str, Any] = field(default_factory=dict)
    prepared_at: str = ""
    consumers: tuple[ConsumerReference, ...] = ()

    @property
    def key(self) -> str:
        """The claim as namespace/name."""
        return f"{self.namespace}/{self.name}"

    def footprint(self) -> dict[str, Usage]:
        """What the claim holds per GPU uuid."""
        return shares_footprint(self.shares)


def encode_prepared_record(node: str, driver: str, claims: Sequence[PreparedClaim]) -> str:
    """The file's text: JSON, claims by uid in the order given."""
    record = {
        "version": VERSION,
        "node": node,
        "driver": driver,
        "claims": {claim.uid: _claim_json(claim) for claim in claims},
    }
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def decode_prepared_record(text: str) -> tuple[str, str, list[PreparedClaim]]:
    """The node, the driver and the claims of a record's text; PreparedRecordError names what
    is wrong (any entry that does not read spoils the whole record, noticed at once)."""
    try:
        record = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise PreparedRecordError(f"not JSON: {exc}") from None
    if not isinstance(record, dict) or record.get("version") != VERSION:
        raise PreparedRecordError(f"not a version {VERSION} record: {brief(record)}")
    node, driver, claims = record.get("node"), record.get("driver"), record.get("claims")
    if not isinstance(node, str) or not isinstance(driver, str) or not isinstance(claims, dict):
        raise PreparedRecordError("needs a string 'node', a string 'driver', an object 'claims'")
    return node, driver, [_claim(uid, entry) for uid, entry in claims.items()]


def encode_claim_info(claim: PreparedClaim, driver: str) -> dict[str, Any]:
    """`claim.json` of a prepared claim: its identity, its limited shares with their
    directories (`shares`), its admin-access shares (`adminShares`, when it has them), the
    pods it was reserved for and when it was prepared."""
    paired = list(zip(claim.shares, claim.cdi_ids, strict=True))
    info: dict[str, Any] = {
        "driver": driver,
        "claim": {"namespace": claim.namespace, "name": claim.name, "uid": claim.uid},
        "shares": [
            {"directory": s.dir_name, **_share_json(s, ids), "memoryLimitMiB": s.limit_mib}
            for s, ids in paired
            if not s.admin
        ],
        "reservedFor": [_consumer_json(c) for c in claim.consumers],
        "preparedAt": claim.prepared_at,
    }
    admin = [_share_json(s, ids) for s, ids in paired if s.admin]
    if admin:
        info["adminShares"] = admin
    return info


def decode_claim_info(uid: str, text: str, spec: Mapping[str, Any]) -> PreparedClaim:
    """The prepared claim a `claim.json` of the claim `uid` describes, with `spec` (its CDI
    spec, {} when that is lost); PreparedRecordError names what is wrong."""
    try:
        info = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise PreparedRecordError(f"claim.json: not JSON: {exc}") from None
    claim = info.get("claim") if isinstance(info, dict) else None
    if not isinstance(claim, dict) or claim.get("uid") != uid:
        raise PreparedRecordError(f"claim.json: 'claim' is not the claim {uid}: {brief(claim)}")
    shares, admin = info.get("shares"), info.get("adminShares", [])
    if not isinstance(shares, list) or not isinstance(admin, list):
        raise PreparedRecordError("claim.json: 'shares' and 'adminShares' must be lists")
    entry = {
        "namespace": claim.get("namespace"),
        "name": claim.get("name"),
        "shares": shares + admin,  # a claim never mixes the two
        "spec": dict(spec),
        "preparedAt": info.get("preparedAt", ""),
        "reservedFor": info.get("reservedFor", []),
    }
    return _claim(uid, entry)


def _claim_json(claim: PreparedClaim) -> dict[str, Any]:
    return {
        "namespace": claim.namespace,
        "name": claim.name,
        "shares": [
            _share_json(s, ids) for s, ids in zip(claim.shares, claim.cdi_ids, strict=True)
        ],
        "spec": dict(claim.spec),
        "preparedAt": claim.prepared_at,
        "reservedFor": [_consumer_json(c) for c in claim.consumers],
    }


def _share_json(share: DeviceShare, cdi_ids: Sequence[str]) -> dict[str, Any]:
    return {
        "request": share.request,
        "pool": share.pool,
        "device": share.device,
        "shareID": share.share_id,
        "uuid": share.uuid,
        "memoryBytes": share.memory_bytes,
        "cores": share.cores,
        "admin": share.admin,
        "cdiIDs": list(cdi_ids),
    }


def _consumer_json(consumer: ConsumerReference) -> dict[str, str]:
    """A `reservedFor` entry as the API writes it."""
    out = {"resource": consumer.resource, "name": consumer.name, "uid": consumer.uid}
    if consumer.api_group:
        out["apiGroup"] = consumer.api_group
    return out


def _claim(uid: str, entry: Any) -> PreparedClaim:
    at = f"claims.{brief(uid, 60)}"
    if not isinstance(entry, dict):
        raise PreparedRecordError(f"{at}: must be an object")
    shares = entry.get("shares")
    spec = entry.get("spec")
    if not isinstance(shares, list) or not shares or not isinstance(spec, dict):
        raise PreparedRecordError(f"{at}: needs a non-empty list 'shares' and an object 'spec'")
    read = [_share(f"{at}.shares[{i}]", s) for i, s in enumerate(shares)]
    return PreparedClaim(
        uid=_text(at, "uid", uid),
        namespace=_text(at, "namespace", entry.get("namespace")),
        name=_text(at, "name", entry.get("name")),
        shares=tuple(s for s, _ in read),
        cdi_ids=tuple(ids for _, ids in read),
        spec=spec,
        prepared_at=_text(at, "preparedAt", entry.get("preparedAt", ""), empty=True),
        consumers=_consumers(at, entry.get("reservedFor", [])),
    )


def _consumers(at: str, entries: Any) -> tuple[ConsumerReference, ...]:
    if not isinstance(entries, list):
        raise PreparedRecordError(f"{at}.reservedFor: must be a list")
    found = []
    for i, entry in enumerate(entries):
        where = f"{at}.reservedFor[{i}]"
        if not isinstance(entry, dict):
            raise PreparedRecordError(f"{where}: must be an object")
        found.append(
            ConsumerReference(
                _text(where, "resource", entry.get("resource")),
                _text(where, "name", entry.get("name")),
                _text(where, "uid", entry.get("uid")),
                _text(where, "apiGroup", entry.get("apiGroup", ""), empty=True),
            )
        )
    return tuple(found)


def _share(at: str, entry: Any) -> tuple[DeviceShare, tuple[str, ...]]:
    if not isinstance(entry, dict):
        raise PreparedRecordError(f"{at}: must be an object")
    share_id = entry.get("shareID")
    ids = entry.get("cdiIDs")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise PreparedRecordError(f"{at}.cdiIDs: must be a non-empty list of strings")
    admin = entry.get("admin", False)
    if not isinstance(admin, bool):
        raise PreparedRecordError(f"{at}.admin: {brief(admin)} is not true or false")
    share = DeviceShare(
        request=_text(at, "request", entry.get("request")),
        pool=_text(at, "pool", entry.get("pool")),
        device=_text(at, "device", entry.get("device")),
        share_id=None if share_id is None else _text(at, "shareID", share_id),
        uuid=_text(at, "uuid", entry.get("uuid")),
        memory_bytes=_whole(at, "memoryBytes", entry.get("memoryBytes"), 2**63 - 1),
        cores=_whole(at, "cores", entry.get("cores"), 100_000),
        admin=admin,
    )
    return share, tuple(ids)


def _text(at: str, key: str, value: Any, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not empty) or len(value) > _MAX_TEXT:
        raise PreparedRecordError(f"{at}.{key}: {brief(value)} is not a name")
    return value


def _whole(at: str, key: str, value: Any, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise PreparedRecordError(f"{at}.{key}: {brief(value)} is not a whole number 0-{high}")
    return value
