"""Grants that fill a node's occupancy record to a byte, for the tests of what happens when it
has no room left: a tenant's pods bound to the node by the tenant itself, whose
device lists name cards no node has, padded so that their entries take what is asked for.

filler_item_bytes(33, room=60)  -> the length each of 33 entries needs to leave 60 bytes
phantom_grant("fill-00", uid, n)  -> hami.io/vgpu-devices-allocated making that entry n long
"""

import json

from vgpu.domain.trust import MAX_ENTRY_BYTES, MAX_RECORD_BYTES
from vgpu.domain.trust.occupancy_record import encode_occupancy_record

TIME = "1750000000"  # the fillers' hami.io/vgpu-time


def filler_item_bytes(count: int, room: int) -> int:
    """The length of each of `count` equal entries that leave `room` bytes of a full record."""
    each = (MAX_RECORD_BYTES - len(encode_occupancy_record({})) - room) // count - 1
    assert each <= MAX_ENTRY_BYTES, "more fillers are needed: each would be over its bound"
    return each


def phantom_grant(name: str, uid: str, item_bytes: int, namespace: str = "default") -> str:
    """A device list for pod `namespace/name` (uid `uid`, time `TIME`) whose record entry,
    `"<uid>":{...}`, is `item_bytes` long."""
    padding = item_bytes - _item_bytes(name, uid, namespace, _grant(name, 0))
    assert padding >= 0, f"an entry of {item_bytes} bytes is too short for pod {name}"
    return _grant(name, padding)


def _grant(name: str, padding: int) -> str:
    return f"GPU-phantom-{name}-{'x' * padding},NVIDIA,0,0:;"


def _item_bytes(name: str, uid: str, namespace: str, allocated: str) -> int:
    entry = {"allocated": allocated, "pod": f"{namespace}/{name}", "time": int(TIME)}
    return len(json.dumps({uid: entry}, separators=(",", ":"), sort_keys=True)) - 2
