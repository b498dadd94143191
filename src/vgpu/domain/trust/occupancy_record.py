"""The occupancy record: what each bound pod on a node was counted with, kept on the Node.

Tenants can edit their pods' annotations but not Nodes, so the scheduler keeps, in the node
annotation `vgpu.io/occupancy`, the grant it counts for each pod on that node: enough to decode
the grant again after a restart, whatever the pod's annotations say by then. Compact JSON,
keys sorted so that two replicas writing the same record write the same text:

    {"v":2,"pods":{"<pod uid>":{"pod":"<namespace>/<name>","time":<hami.io/vgpu-time>,
     "allocated":"<hami.io/vgpu-devices-allocated>","mig":"<signed MIG reservations>"}},
     "overflow":{"<pod uid>":{"pod":"<namespace>/<name>","grant":"<digest of its entry>"}}}

`time` is a number: the grant's `hami.io/vgpu-time` when it is a whole number of seconds
written as the schedulers write it (no sign, no leading zero, at most Go's int64), left out
otherwise; nothing else a tenant could have written is copied in whole. `mig` is there only
when the grant has MIG instances. A node's annotations share 256 KiB, so an entry is at most
`MAX_ENTRY_BYTES` and the record at most `MAX_RECORD_BYTES`. A pod whose entry is too big, or
does not fit, is named in `overflow` instead (the largest entries go there first), with the
SHA-256 digest of the entry it would have had (`OccupancyEntry.digest`): whoever reads the record
later can tell whether the pod's annotations still carry the grant that was counted (its tenant
cannot make another grant with that digest), and must not take them for it otherwise. A name
without a digest (written before digests were kept) matches no annotations.

Only the scheduler writes the record, so one that does not read is a bug or an operator's edit:
what reads is used, the rest is reported and dropped at the next write. Records of version 1
(the time as a string, no overflow) read too.

>>> entry = OccupancyEntry("default/p", "1750000000", "GPU-0,NVIDIA,1000,10:;")
>>> text = encode_occupancy_record({"u1": entry})
>>> text
'{"pods":{"u1":{"allocated":"GPU-0,NVIDIA,1000,10:;","pod":"default/p","time":1750000000}},"v":2}'
>>> decode_occupancy_record(text).entries["u1"] == entry
True
>>> from dataclasses import replace
>>> hostile = replace(entry.claim("u1", "n1"), assigned_time="1" * 130_851)
>>> OccupancyEntry.of("default/p", hostile).assigned_time
''
"""

import hashlib
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from vgpu.domain.errors import CodecError, brief
from vgpu.domain.hostile_text import INT64, read_json, whole_number
from vgpu.domain.trust.signing import GrantClaim

OCCUPANCY_ANNOTATION = "vgpu.io/occupancy"
RECORD_VERSION = 2
READ_VERSIONS = (1, 2)
MAX_RECORD_BYTES = 128 * 1024  # half of what a Node's annotations may hold together
MAX_ENTRY_BYTES = 4 * 1024  # a grant of about 60 cards; a pod's own is a few hundred bytes
MAX_POD_KEY = 63 + 1 + 253  # a namespace, '/', a pod name, at Kubernetes' own limits
MAX_UID = 128  # Kubernetes writes 36-character UUIDs
DIGEST_CHARS = 32


@dataclass(frozen=True, slots=True)
class OccupancyEntry:
    """One pod's counted grant: its key and the grant's annotations as they were counted.

    `of` and decoding keep `assigned_time` only when the record can (`recordable_time`); an
    entry made otherwise with another time is written without one."""

    pod: str  # namespace/name, for people and logs; the record is keyed by uid
    assigned_time: str  # hami.io/vgpu-time as a whole number of seconds, or ''
    allocated: str  # hami.io/vgpu-devices-allocated, byte for byte
    mig_reservations: str = ""  # hami.io/vgpu-mig-allocations as signed (no runtime fields)
    _text: str = field(default="", init=False, repr=False, compare=False)

    @classmethod
    def of(cls, pod: str, claim: GrantClaim) -> "OccupancyEntry":
        time = recordable_time(claim.assigned_time)
        return cls(pod, time, claim.allocated, claim.mig_reservations)

    def claim(self, uid: str, node: str) -> GrantClaim:
        """The grant this entry records, as a claim of pod `uid` on `node`."""
        return GrantClaim(uid, node, self.assigned_time, self.allocated, self.mig_reservations)

    @property
    def digest(self) -> str:
        """What the overflow keeps of the entry: the first 128 bits of its JSON's SHA-256."""
        return hashlib.sha256(self.text.encode()).hexdigest()[:DIGEST_CHARS]

    @property
    def text(self) -> str:
        """The entry's JSON in the record (made once: a bind re-encodes every entry)."""
        if not self._text:
            out: dict[str, Any] = {"pod": self.pod, "allocated": self.allocated}
            if recordable_time(self.assigned_time):
                out["time"] = int(self.assigned_time)
            if self.mig_reservations:
                out["mig"] = self.mig_reservations
            object.__setattr__(self, "_text", _compact(out))
        return self._text


@dataclass(frozen=True, slots=True)
class OverflowName:
    """A pod the record names in its overflow: its namespace/name, and the digest of the entry
    its counted grant would have had ('' when unknown)."""

    pod: str
    grant: str = ""

    @classmethod
    def of(cls, entry: OccupancyEntry) -> "OverflowName":
        return cls(entry.pod, entry.digest)

    @property
    def text(self) -> str:
        return _compact({"grant": self.grant, "pod": self.pod} if self.grant else self.pod)


@dataclass(frozen=True, slots=True)
class OccupancyRecord:
    """A decoded record: the entries that read, by pod uid; the pods it names in `overflow`,
    counted but without a grant in the record; what did not read."""

    entries: Mapping[str, OccupancyEntry]
    problems: tuple[str, ...] = ()
    overflow: Mapping[str, OverflowName] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OccupancyRecordChange:
    """What to write: the new annotation text (None: nothing changes), the entries and overflow
    the record holds then, the uids whose grants this write put into the overflow (asked for,
    or in the record before), the uids it could not even name there, and the size the record
    would have had with every entry asked for."""

    text: str | None
    entries: Mapping[str, OccupancyEntry]
    overflow: Mapping[str, OverflowName] = field(default_factory=dict)
    left_out: tuple[str, ...] = ()
    unlisted: tuple[str, ...] = ()
    wanted_size: int = 0


def recordable_time(text: str) -> str:
    """`hami.io/vgpu-time` as the record keeps it: the text when it is a whole number of
    seconds written as HAMi and vgpu write it (0..int64, no sign or leading zero), else ''."""
    if text.isascii() and text.isdigit() and len(text) < 19 and text[0] != "0":
        return text  # the usual case, quickly: any 18 digits are within int64
    try:
        seconds = whole_number(text, 0, INT64[1])
    except ValueError:
        return ""
    return text if str(seconds) == text else ""


def encode_occupancy_record(
    entries: Mapping[str, OccupancyEntry], overflow: Mapping[str, OverflowName] | None = None
) -> str:
    """The record's text: `json.dumps` of it with sorted keys and no spaces, joined from each
    entry's and name's own text."""
    overflow = overflow or {}
    pods = ",".join(f"{_compact(uid)}:{entries[uid].text}" for uid in sorted(entries))
    names = ",".join(f"{_compact(uid)}:{overflow[uid].text}" for uid in sorted(overflow))
    named = f'"overflow":{{{names}}},' if overflow else ""
    return f'{{{named}"pods":{{{pods}}},"v":{RECORD_VERSION}}}'


def decode_occupancy_record(text: str | None) -> OccupancyRecord:
    """The entries of a record's text (none for None or ''); what does not read is skipped and
    named in `problems`, never raised."""
    if not text:
        return OccupancyRecord({})
    try:
        data = read_json(text, OCCUPANCY_ANNOTATION)
    except CodecError as exc:
        return OccupancyRecord({}, (str(exc),))
    if not isinstance(data, dict) or not isinstance(data.get("pods"), dict):
        return OccupancyRecord({}, (f'{OCCUPANCY_ANNOTATION} must be an object with "pods"',))
    version = data.get("v")
    if type(version) is not int or version not in READ_VERSIONS:
        return OccupancyRecord(
            {}, (f"{OCCUPANCY_ANNOTATION} has version {brief(version, 20)}, not 1 or 2",)
        )
    entries: dict[str, OccupancyEntry] = {}
    problems: list[str] = []
    for uid, raw in data["pods"].items():
        entry, problem = _entry(uid, raw)
        if entry is not None:
            entries[uid] = entry
        if problem:
            problems.append(f"{OCCUPANCY_ANNOTATION} entry {brief(uid, 60)} {problem}")
    overflow = _overflow(data.get("overflow", {}), problems)
    for uid in entries.keys() & overflow.keys():
        del overflow[uid]
    return OccupancyRecord(entries, tuple(problems), overflow)


def updated_occupancy_record(
    text: str | None,
    add: Mapping[str, OccupancyEntry],
    drop: Collection[str] = (),
    limit: int = MAX_RECORD_BYTES,
    decoded: OccupancyRecord | None = None,
) -> OccupancyRecordChange:
    """The record `text` with the entries and overflow names of `drop` (uids of pods that
    ended) removed and the entries of `add` put in; an entry over `MAX_ENTRY_BYTES` goes to the
    overflow, and while the record is over `limit` bytes the largest entries go there too (those
    of `add` first among equals). Entries that do not read are dropped. `decoded` is `text`
    already decoded, if the caller has it."""
    record = decoded if decoded is not None else decode_occupancy_record(text)
    entries = {uid: e for uid, e in record.entries.items() if uid not in drop}
    overflow = {uid: name for uid, name in record.overflow.items() if uid not in drop}
    for uid, entry in add.items():
        overflow.pop(uid, None)
        entries[uid] = entry
    encoded = encode_occupancy_record(entries, overflow)
    wanted_size = len(encoded)
    oversized = [uid for uid, entry in add.items() if _entry_bytes(uid, entry) > MAX_ENTRY_BYTES]
    if oversized:
        for uid in oversized:
            overflow[uid] = OverflowName.of(entries.pop(uid))
        encoded = encode_occupancy_record(entries, overflow)
    unlisted: tuple[str, ...] = ()
    if len(encoded) > limit:
        unlisted = _make_room(entries, overflow, set(add), record.overflow.keys(), limit)
        encoded = encode_occupancy_record(entries, overflow)
    left_out = tuple(sorted(uid for uid in overflow if uid in add or uid in record.entries))
    unchanged = encoded == (text or "") or (not entries and not overflow and not text)
    return OccupancyRecordChange(
        None if unchanged else encoded, entries, overflow, left_out, unlisted, wanted_size
    )


def _make_room(
    entries: dict[str, OccupancyEntry],
    overflow: dict[str, OverflowName],
    added: set[str],
    listed_before: Collection[str],
    limit: int,
) -> tuple[str, ...]:
    """Move the largest entries into `overflow` until the record fits `limit`; if even names
    alone do not fit, drop the names new to the record (returned), then the others."""
    sizes = {uid: _entry_bytes(uid, entry) for uid, entry in entries.items()}
    names = {uid: _name_bytes(uid, pod) for uid, pod in overflow.items()}
    kept, named = sum(sizes.values()), sum(names.values())

    def length() -> int:
        return _record_bytes(kept, len(entries), named, len(overflow))

    for uid in sorted(sizes, key=lambda u: (-sizes[u], u not in added, u)):
        if length() <= limit:
            break
        overflow[uid] = OverflowName.of(entries.pop(uid))
        names[uid] = _name_bytes(uid, overflow[uid])
        kept, named = kept - sizes[uid], named + names[uid]
    dropped = []
    for uid in sorted(overflow, key=lambda u: (u in listed_before, u)):
        if length() <= limit:
            break
        del overflow[uid]
        named -= names[uid]
        dropped.append(uid)
    return tuple(dropped)


_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)  # one, not one per call


def _compact(value: Any) -> str:
    return _ENCODER.encode(value)


def _entry_bytes(uid: str, entry: OccupancyEntry) -> int:
    """The length of `"<uid>":{...}` in the record's text."""
    return len(_compact(uid)) + 1 + len(entry.text)


def _name_bytes(uid: str, name: OverflowName) -> int:
    return len(_compact(uid)) + 1 + len(name.text)


_EMPTY_RECORD = len(encode_occupancy_record({}))
_OVERFLOW_KEY = len(_compact({"overflow": {}})) - 1  # `"overflow":{}` and the comma after it


def _record_bytes(entry_bytes: int, entries: int, name_bytes: int, names: int) -> int:
    """The length of a record's text from its items' lengths and counts (commas between)."""
    length = _EMPTY_RECORD + entry_bytes + max(entries - 1, 0)
    if names:
        length += _OVERFLOW_KEY + name_bytes + names - 1
    return length


def _entry(uid: Any, raw: Any) -> tuple[OccupancyEntry | None, str]:
    """The entry, or None and why it does not read; a time that is not one is left out (the
    entry still reads: the time decides nothing a pod holds) and reported."""
    if not isinstance(uid, str) or not uid or len(uid) > MAX_UID:
        return None, f"has no pod uid of 1 to {MAX_UID} characters"
    if not isinstance(raw, dict):
        return None, f"does not read: {brief(raw, 200)}"
    pod, allocated, mig = raw.get("pod"), raw.get("allocated"), raw.get("mig", "")
    if not isinstance(pod, str) or not pod or len(pod) > MAX_POD_KEY:
        return None, f"names no pod of 1 to {MAX_POD_KEY} characters: {brief(pod, 100)}"
    if not isinstance(allocated, str) or not allocated or not isinstance(mig, str):
        return None, f"does not read: {brief(raw, 200)}"
    time, problem = _time(raw.get("time"))
    return OccupancyEntry(pod, time, allocated, mig), problem


def _time(raw: Any) -> tuple[str, str]:
    """The recorded time as claim text ('' when none), and a problem when it is not one."""
    if raw is None:
        return "", ""
    if type(raw) is int and 0 <= raw <= INT64[1]:
        return str(raw), ""
    if isinstance(raw, str) and recordable_time(raw):  # version 1 kept the text
        return raw, ""
    return "", f"has a time that is not a whole number of seconds ({brief(raw, 40)}): left out"


def _overflow(raw: Any, problems: list[str]) -> dict[str, OverflowName]:
    if not isinstance(raw, dict):
        problems.append(f"{OCCUPANCY_ANNOTATION} overflow is not an object: {brief(raw, 100)}")
        return {}
    found: dict[str, OverflowName] = {}
    for uid, item in raw.items():
        name = _overflow_name(item)
        if uid and len(uid) <= MAX_UID and name is not None:
            found[uid] = name
        else:
            problems.append(
                f"{OCCUPANCY_ANNOTATION} overflow {brief(uid, 60)} names no pod: {brief(item, 100)}"
            )
    return found


def _overflow_name(item: Any) -> OverflowName | None:
    """`{"pod": ..., "grant": <digest>}`, or the bare name written before digests were kept."""
    pod, grant = (item.get("pod"), item.get("grant")) if isinstance(item, dict) else (item, "")
    if not isinstance(pod, str) or not 0 < len(pod) <= MAX_POD_KEY:
        return None
    if not isinstance(grant, str) or len(grant) != (DIGEST_CHARS if grant else 0):
        return None
    return OverflowName(pod, grant)
