"""The kubelet's device checkpoint, `<device-plugin dir>/kubelet_internal_checkpoint`.

The kubelet's device manager writes it as JSON after every allocation and at start:

    {"Data": {"PodDeviceEntries": [{"PodUID": "...", "ContainerName": "main",
               "ResourceName": "nvidia.com/gpu", "DeviceIDs": {"0": ["GPU-...-3"]},
               "AllocResp": "<base64 of the ContainerAllocateResponse protobuf>"}],
              "RegisteredDevices": {"nvidia.com/gpu": ["GPU-...-0", ...]}},
     "Checksum": 1234567890}

`DeviceIDs` maps NUMA node to ids since Kubernetes 1.20 (`"-1"` when unknown); before, it was a
plain list. The checksum is not verified (it is an FNV hash over Go's printing of the structs):
the file is root's on the host, written by the kubelet only. The parsed entries are kept until
the file changes (inode, size, modification time), so reading it on every Allocate costs one
stat.
"""

import base64
import binascii
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from vgpu.adapters.kubelet.generated import api_pb2 as pb
from vgpu.domain.trust import DeviceAssignment
from vgpu.ports.kubelet import CheckpointUnreadable

CHECKPOINT_FILE = "kubelet_internal_checkpoint"
_FileId = tuple[int, int, int, int]  # device, inode, size, mtime


class KubeletCheckpoint:
    """Implements KubeletCheckpointPort for the kubelet's device-plugin directory."""

    def __init__(self, plugin_dir: str | Path, name: str = CHECKPOINT_FILE) -> None:
        self._path = Path(plugin_dir) / name
        self._read: tuple[_FileId, tuple[DeviceAssignment, ...]] | None = None

    @property
    def path(self) -> str:
        return str(self._path)

    def assignments(self) -> Sequence[DeviceAssignment]:
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return ()
        except OSError as exc:
            raise CheckpointUnreadable(f"cannot read {self._path}: {exc.strerror}") from None
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if self._read is not None and self._read[0] == identity:
            return self._read[1]
        try:
            text = self._path.read_bytes()
        except FileNotFoundError:
            return ()
        except OSError as exc:
            raise CheckpointUnreadable(f"cannot read {self._path}: {exc.strerror}") from None
        found = parse_checkpoint(text, str(self._path))
        self._read = (identity, found)
        return found


def parse_checkpoint(text: bytes, source: str) -> tuple[DeviceAssignment, ...]:
    """The entries of a checkpoint's text; CheckpointUnreadable names `source` and the fault."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CheckpointUnreadable(f"{source} is not JSON: {exc}") from None
    data = document.get("Data") if isinstance(document, dict) else None
    entries = data.get("PodDeviceEntries") if isinstance(data, dict) else None
    if entries is None and isinstance(data, dict):
        return ()
    if not isinstance(entries, list):
        raise CheckpointUnreadable(f"{source}: no Data.PodDeviceEntries list")
    return tuple(_entry(item, f"{source}: PodDeviceEntries[{i}]") for i, item in enumerate(entries))


def _entry(item: Any, where: str) -> DeviceAssignment:
    if not isinstance(item, dict):
        raise CheckpointUnreadable(f"{where} is not an object")
    texts = [item.get(key) for key in ("PodUID", "ContainerName", "ResourceName")]
    if not all(isinstance(t, str) and t for t in texts):
        raise CheckpointUnreadable(f"{where} lacks PodUID, ContainerName or ResourceName")
    uid, container, resource = (str(t) for t in texts)
    return DeviceAssignment(
        uid, container, resource, _device_ids(item.get("DeviceIDs"), where), _envs(item)
    )


def _device_ids(raw: Any, where: str) -> tuple[str, ...]:
    """The ids of either shape: by NUMA node (Kubernetes 1.20 on) or a plain list (before)."""
    if raw is None:
        return ()
    groups: list[Any] = list(raw.values()) if isinstance(raw, Mapping) else [raw]
    ids: list[str] = []
    for group in groups:
        if group is None:
            continue
        if not isinstance(group, list) or not all(isinstance(i, str) for i in group):
            raise CheckpointUnreadable(f"{where}: DeviceIDs {str(raw)[:80]} are not id lists")
        ids.extend(group)
    return tuple(ids)


def _envs(item: dict[str, Any]) -> Mapping[str, str] | None:
    """The environment of the Allocate answer the kubelet kept; None when there is none or it
    does not decode (the holder is then counted by its device ids)."""
    raw = item.get("AllocResp")
    if not isinstance(raw, str) or not raw:
        return None
    try:
        answer = pb.ContainerAllocateResponse.FromString(base64.b64decode(raw, validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None
    return dict(answer.envs)
