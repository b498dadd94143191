"""Running the real `vgpu dra-driver` process against the API emulator and a fake kubelet: its
command line, directories, log, and the claims a scheduler would have allocated."""

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.dra.kubelet import FakeDraKubelet
from tests.e2e.k8s_emulator import RunningApiServer
from tests.e2e.processes import ProcessControl
from tests.unit.dra_driver.node import DRIVER, NODE, UUID_A, UUID_B
from vgpu.domain.dra import (
    DeviceClass,
    DeviceRequest,
    ExactDeviceRequest,
    ResourceClaim,
    allocation_json,
    device_class_json,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
    resource_claim_json,
)
from vgpu.domain.dra.allocator import allocate
from vgpu.domain.dra.outcome import Allocation

CLAIMS = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
GPU_CLASS = DeviceClass("gpu.vgpu.io", (f'device.driver == "{DRIVER}"',))


def gpu_file_text(healthy_b: bool = True) -> str:
    return (
        "driver_version: 550.54.15\ncuda_driver_version: '12.4'\ngpus:\n"
        f"  - uuid: {UUID_A}\n    name: Tesla V100-PCIE-32GB\n    memory_mib: 32768\n"
        "    architecture: Volta\n    pci_bus_id: 0000:3b:00.0\n"
        f"  - uuid: {UUID_B}\n    name: Tesla V100-PCIE-32GB\n    memory_mib: 32768\n"
        f"    numa: 1\n    healthy: {'true' if healthy_b else 'false'}\n"
        f"    reason: '{'' if healthy_b else 'Xid 79 (fallen off the bus)'}'\n"
    )


@dataclass
class DriverEnv(ProcessControl):
    api: RunningApiServer
    root: Path  # short: socket paths must stay within 107 bytes
    kubelet: FakeDraKubelet
    gpu_file: Path
    kubeconfig: Path
    log_file: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def dir(self, name: str) -> Path:
        return self.root / name

    def command(self, *extra: str) -> list[str]:
        return [
            sys.executable, "-m", "vgpu.app.cli", "dra-driver",
            "--node-name", NODE,
            "--fake-gpus", str(self.gpu_file),
            "--kubeconfig", str(self.kubeconfig),
            "--registry-dir", str(self.dir("registry")),
            "--plugin-dir", str(self.dir("plugin")),
            "--cdi-dir", str(self.dir("cdi")),
            "--state-dir", str(self.dir("state")),
            "--hook-path", str(self.dir("hook")),
            *extra,
        ]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VGPU_", "NODE_NAME"))}
        env.update(
            VGPU_LOCK_DIR=str(self.dir("lock")),
            VGPU_DEVICE_PLUGIN_DIR=str(self.dir("device-plugins")),
            VGPU_STATIC_CDI_DIRS=str(self.dir("etc-cdi")),
            VGPU_RESYNC_INTERVAL="0.5",
            VGPU_PUBLISH_RETRY="0.2",
            VGPU_SOCKET_CHECK_INTERVAL="0.1",
        )
        return env

    def start_registered(self, *extra: str) -> subprocess.Popen[bytes]:
        process = self.start(*extra)
        self.kubelet.discover()
        assert self.wait_for_log("the kubelet registered DRA driver"), self.log()
        return process

    def wait_for_log(self, text: str, timeout: float = 20.0) -> bool:
        return super().wait_for_log(text, timeout)

    # what a scheduler would have written, and what the driver wrote ---------------------------
    def claim(self, manifest: dict[str, Any]) -> tuple[str, str, str]:
        """Create the allocated claim in the API; (namespace, name, uid) for the kubelet."""
        created = self.api.create(CLAIMS, manifest)
        meta = created["metadata"]
        return meta["namespace"], meta["name"], meta["uid"]

    def schedule(
        self,
        name: str,
        capacity: dict[str, int],
        *,
        count: int = 1,
        pods: tuple[str, ...] = ("pod-x",),
        sees_others: bool = True,
    ) -> tuple[str, str, str]:
        """What kube-scheduler does for a pod's claim: create it, allocate it on the node with
        the domain's allocator (from the published slices and the DeviceClass, counting the
        claims already allocated unless `sees_others` is False: a scheduler that missed them),
        and write the allocation and reservation into its status. (namespace, name, uid)."""
        if not self.api.list_items(CLASSES):
            self.api.create(CLASSES, device_class_json(GPU_CLASS))
        wanted = ResourceClaim(name, "ml", requests=(
            DeviceRequest("gpu", ExactDeviceRequest("gpu.vgpu.io", count=count, capacity=capacity)),
        ))
        created = self.api.create(CLAIMS, resource_claim_json(wanted))
        claim = parse_resource_claim(created)
        others = [parse_resource_claim(c) for c in self.api.list_items(CLAIMS)]
        outcome = allocate(
            [claim],
            NODE,
            [parse_resource_slice(s) for s in self.slices()],
            [parse_device_class(c) for c in self.api.list_items(CLASSES)],
            [c for c in others if c.uid != claim.uid] if sees_others else (),
        )
        assert isinstance(outcome, Allocation), outcome
        status = {
            "allocation": allocation_json(outcome.results[0]),
            "reservedFor": [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in pods],
        }
        self.api.merge_patch(f"{CLAIMS}/{name}/status", {"status": status})
        return "ml", name, claim.uid

    def slices(self) -> list[dict[str, Any]]:
        return self.api.list_items(SLICES)

    def spec(self, uid: str) -> dict[str, Any] | None:
        path = self.dir("cdi") / f"vgpu.io-claim_{uid}.json"
        return json.loads(path.read_text()) if path.exists() else None


def wait_until(condition: Any, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())
