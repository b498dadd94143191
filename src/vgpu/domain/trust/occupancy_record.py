"""The occupancy record: what each bound pod on a node was counted with, kept on the Node.

Tenants can edit their pods' annotations but not Nodes, so the scheduler keeps, in the node
annotation `vgpu.io/occupancy`, the grant it counts for each pod on that node: enough to decode
the grant again after a restart, whatever the pod's annotations say by then. Compact JSON,
keys sorted so that two replicas writing the same record write the same text:

    {"v":1,"pods":{"<pod uid>":{"pod":"<namespace>/<name>","time":"<hami.io/vgpu-time>",
     "allocated":"<hami.io/vgpu-devices-allocated>","mig":"<signed MIG reservations>"}}}

(`mig` only when the grant has MIG instances). Only the scheduler writes it, so a record that
does not read is a bug or an operator's edit: what reads is used, the rest is reported and
dropped at the next write. A node's annotations share 256 KiB, so the record is bounded
(`MAX_RECORD_BYTES`); an entry that would take it past the bound is left out and reported.

>>> entry = OccupancyEntry("default/p", "1750000000", "GPU-0,NVIDIA,1000,10:;")
>>> text = encode_occupancy_record({"u1": entry})
>>> text
'{"pods":{"u1":{"allocated":"GPU-0,NVIDIA,1000,10:;","pod":"default/p","time":"1750000000"}},"v":1}'
>>> decode_occupancy_record(text).entries["u1"] == entry
True
"""

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.domain.trust.signing import GrantClaim

OCCUPANCY_ANNOTATION = "vgpu.io/occupancy"
RECORD_VERSION = 1
MAX_RECORD_BYTES = 128 * 1024  # half of what a Node's annotations may hold together


@dataclass(frozen=True, slots=True)
class OccupancyEntry:
    """One pod's counted grant: its key and the grant's annotations as they were counted."""

    pod: str  # namespace/name, for people and logs; the record is keyed by uid
    assigned_time: str  # hami.io/vgpu-time
    allocated: str  # hami.io/vgpu-devices-allocated, byte for byte
    mig_reservations: str = ""  # hami.io/vgpu-mig-allocations as signed (no runtime fields)

    @classmethod
    def of(cls, pod: str, claim: GrantClaim) -> "OccupancyEntry":
        return cls(pod, claim.assigned_time, claim.allocated, claim.mig_reservations)

    def claim(self, uid: str, node: str) -> GrantClaim:
        """The grant this entry records, as a claim of pod `uid` on `node`."""
        return GrantClaim(uid, node, self.assigned_time, self.allocated, self.mig_reservations)


@dataclass(frozen=True, slots=True)
class OccupancyRecord:
    """A decoded record: the entries that read, by pod uid, and what did not read."""

    entries: Mapping[str, OccupancyEntry]
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OccupancyRecordChange:
    """What to write: the new annotation text (None: nothing changes) and the entries the record
    holds then, the uids whose entries were left out because the record would pass its bound,
    and the size it would have had with every entry asked for."""

    text: str | None
    entries: Mapping[str, OccupancyEntry]
    left_out: tuple[str, ...] = ()
    wanted_size: int = 0


def encode_occupancy_record(entries: Mapping[str, OccupancyEntry]) -> str:
    pods = {uid: _entry_json(entry) for uid, entry in entries.items()}
    return json.dumps({"v": RECORD_VERSION, "pods": pods}, separators=(",", ":"), sort_keys=True)


def decode_occupancy_record(text: str | None) -> OccupancyRecord:
    """The entries of a record's text (none for None or ''); what does not read is skipped and
    named in `problems`, never raised."""
    if not text:
        return OccupancyRecord({})
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return OccupancyRecord({}, (f"{OCCUPANCY_ANNOTATION} is not JSON: {exc}",))
    if not isinstance(data, dict) or not isinstance(data.get("pods"), dict):
        return OccupancyRecord({}, (f'{OCCUPANCY_ANNOTATION} must be an object with "pods"',))
    if data.get("v") != RECORD_VERSION:
        version = data.get("v")
        return OccupancyRecord({}, (f"{OCCUPANCY_ANNOTATION} has version {version!r}, not 1",))
    entries: dict[str, OccupancyEntry] = {}
    problems: list[str] = []
    for uid, raw in data["pods"].items():
        entry = _entry(raw)
        if uid and entry is not None:
            entries[uid] = entry
        else:
            problems.append(f"{OCCUPANCY_ANNOTATION} entry {uid!r} does not read: {raw!r:.200}")
    return OccupancyRecord(entries, tuple(problems))


def updated_occupancy_record(
    text: str | None,
    add: Mapping[str, OccupancyEntry],
    drop: Collection[str] = (),
    limit: int = MAX_RECORD_BYTES,
    decoded: OccupancyRecord | None = None,
) -> OccupancyRecordChange:
    """The record `text` with the entries of `drop` (uids of pods that ended) removed and those
    of `add` put in; entries that would take it past `limit` bytes are left out (the others and
    the removals still apply). Entries that do not read are dropped. `decoded` is `text`
    already decoded, if the caller has it."""
    record = decoded if decoded is not None else decode_occupancy_record(text)
    kept = {uid: e for uid, e in record.entries.items() if uid not in drop}
    wanted = {**kept, **add}
    encoded = encode_occupancy_record(wanted)
    wanted_size = len(encoded)
    left_out: tuple[str, ...] = ()
    if wanted_size > limit:
        left_out = tuple(sorted(uid for uid, e in add.items() if kept.get(uid) != e))
        wanted = kept
        encoded = encode_occupancy_record(kept)
    if encoded == (text or "") or (not wanted and not text):
        return OccupancyRecordChange(None, wanted, left_out, wanted_size)
    return OccupancyRecordChange(encoded, wanted, left_out, wanted_size)


def _entry_json(entry: OccupancyEntry) -> dict[str, str]:
    out = {"pod": entry.pod, "time": entry.assigned_time, "allocated": entry.allocated}
    if entry.mig_reservations:
        out["mig"] = entry.mig_reservations
    return out


def _entry(raw: Any) -> OccupancyEntry | None:
    if not isinstance(raw, dict):
        return None
    pod, time, allocated = raw.get("pod"), raw.get("time", ""), raw.get("allocated")
    mig = raw.get("mig", "")
    if (
        isinstance(pod, str)
        and isinstance(time, str)
        and isinstance(allocated, str)
        and isinstance(mig, str)
        and pod
        and allocated
    ):
        return OccupancyEntry(pod, time, allocated, mig)
    return None
