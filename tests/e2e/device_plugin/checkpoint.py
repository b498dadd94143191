"""The kubelet device manager's checkpoint, `kubelet_internal_checkpoint`, as the fake kubelet
keeps it in the device-plugin directory.

The kubelet (1.20 on) writes Go's `encoding/json` of its checkpoint structs:

    {"Data":{"PodDeviceEntries":[{"PodUID":"...","ContainerName":"main",
      "ResourceName":"nvidia.com/gpu","DeviceIDs":{"0":["GPU-...-3"]},
      "AllocResp":"<base64 of the ContainerAllocateResponse protobuf>"}],
      "RegisteredDevices":{"nvidia.com/gpu":["GPU-...-0",...]}},"Checksum":0}

- struct fields in their declared order, map keys sorted as text, no spaces; no entries at all
  is `null`;
- one entry per pod, container and resource, replaced by a later Allocate for the same ones;
- `DeviceIDs` groups a container's ids by the NUMA nodes of each device's topology as
  ListAndWatch sent it, a device without one under `-1`;
- `RegisteredDevices`: each resource's healthy devices from its plugin's latest list;
- written to a temporary file and renamed, as the kubelet's checkpoint store does, so a reader
  never sees half a file.

`Checksum`: the kubelet's is an FNV-32a hash of Go's `spew` printing of `Data`, which only the
kubelet checks, when it reads its own file back. vgpu's device plugin does not check it, and
this fake writes 0 rather than imitate Go's printing.
"""

import base64
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vgpu.adapters.kubelet.checkpoint import CHECKPOINT_FILE

NO_TOPOLOGY = "-1"  # the kubelet's key for devices that came without a NUMA node
HEALTHY = "Healthy"


class DeviceCheckpoint:
    def __init__(self, plugin_dir: Path) -> None:
        self.path = plugin_dir / CHECKPOINT_FILE
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._registered: dict[str, list[str]] = {}
        self._numa: dict[str, dict[str, list[int]]] = {}  # resource -> device -> NUMA nodes

    def restore(self) -> None:
        """Read the file back, as the kubelet does when it starts (none: nothing yet)."""
        if not self.path.exists():
            return
        data = json.loads(self.path.read_text())["Data"]
        with self._lock:
            self._entries = {
                (e["PodUID"], e["ContainerName"], e["ResourceName"]): e
                for e in data["PodDeviceEntries"] or []
            }
            self._registered = dict(data["RegisteredDevices"] or {})

    def listed(self, resource: str, devices: Sequence[Any]) -> None:
        """A plugin sent its device list (`v1beta1.Device` messages) for `resource`."""
        with self._lock:
            self._numa[resource] = {d.ID: [n.ID for n in d.topology.nodes] for d in devices}
            self._registered[resource] = [d.ID for d in devices if d.health == HEALTHY]
            self._write()

    def allocated(
        self, uid: str, container: str, resource: str, ids: Sequence[str], answer: Any
    ) -> None:
        """The plugin answered an Allocate of `ids` to the container with `answer`."""
        with self._lock:
            self._entries[(uid, container, resource)] = {
                "PodUID": uid,
                "ContainerName": container,
                "ResourceName": resource,
                "DeviceIDs": self._by_numa(resource, ids),
                "AllocResp": base64.b64encode(answer.SerializeToString()).decode(),
            }
            self._write()

    def entries(self) -> list[dict[str, Any]]:
        """The entries as the file has them now."""
        data = json.loads(self.path.read_text())["Data"]
        return list(data["PodDeviceEntries"] or [])

    def _by_numa(self, resource: str, ids: Sequence[str]) -> dict[str, list[str]]:
        numa = self._numa.get(resource, {})
        groups: dict[str, list[str]] = {}
        for device in ids:
            for node in [str(n) for n in numa.get(device, [])] or [NO_TOPOLOGY]:
                groups.setdefault(node, []).append(device)
        return dict(sorted(groups.items()))

    def _write(self) -> None:
        data = {
            "PodDeviceEntries": list(self._entries.values()) or None,
            "RegisteredDevices": dict(sorted(self._registered.items())),
        }
        text = json.dumps({"Data": data, "Checksum": 0}, separators=(",", ":"))
        partial = self.path.with_name(f".{self.path.name}.tmp")
        partial.write_text(text)
        os.replace(partial, self.path)
