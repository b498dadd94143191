"""Running the real `vgpu device-plugin` process: its command line, log, node and GPU file."""

import base64
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.device_plugin.kubelet import FakeKubelet
from tests.e2e.k8s_emulator import RunningApiServer
from tests.e2e.processes import ProcessControl
from vgpu.domain.trust import KeyRing

NODE = "gpu-node-1"
UUID_A = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
UUID_B = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
SPLIT = 3
RING = KeyRing({"2026-01": b"e2e-grant-key-0123456789abcdef0123"})


def key_secret_manifest(ring: KeyRing = RING) -> dict[str, object]:
    """The grant key ring as the scheduler stores it (the plugin's default Secret)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "vgpu-grant-keys", "namespace": "vgpu-system"},
        "type": "Opaque",
        "data": {name: base64.b64encode(key).decode() for name, key in ring.keys.items()},
    }


def gpu_file_text(healthy_b: bool = True) -> str:
    return (
        "gpus:\n"
        f"  - uuid: {UUID_A}\n    name: Tesla V100-PCIE-32GB\n    memory_mib: 32768\n"
        f"  - uuid: {UUID_B}\n    name: Tesla V100-PCIE-32GB\n    memory_mib: 32768\n"
        f"    numa: 1\n    healthy: {'true' if healthy_b else 'false'}\n"
        f"    reason: '{'' if healthy_b else 'Xid 79 (fallen off the bus)'}'\n"
    )


@dataclass
class PluginEnv(ProcessControl):
    api: RunningApiServer
    kubelet: FakeKubelet
    plugin_dir: Path
    hook: Path
    gpu_file: Path
    kubeconfig: Path
    log_file: Path
    state_dir: Path  # where the plugin keeps its served record
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)  # VGPU_* settings of one test

    def command(self, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "vgpu.app.cli",
            "device-plugin",
            "--node-name",
            NODE,
            "--fake-gpus",
            str(self.gpu_file),
            "--kubeconfig",
            str(self.kubeconfig),
            "--plugin-dir",
            str(self.plugin_dir),
            "--hook-path",
            str(self.hook),
            "--split-count",
            str(SPLIT),
            "--state-dir",
            str(self.state_dir),
            *extra,
        ]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VGPU_", "NODE_NAME"))}
        env.update(
            VGPU_KUBELET_POLL="0.05",
            VGPU_REGISTER_RETRY="0.2",
            VGPU_LOCK_DIR=str(self.hook / "vgpulock"),
            VGPU_HEALTH_LISTEN="127.0.0.1:0",  # any free port: tests may run side by side
        )
        env.update(self.extra_env)
        return env

    def node_annotations(self) -> dict[str, str]:
        node = self.api.get(f"/api/v1/nodes/{NODE}") or {}
        annotations: dict[str, str] = node.get("metadata", {}).get("annotations") or {}
        return annotations
