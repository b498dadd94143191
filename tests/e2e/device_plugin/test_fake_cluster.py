"""`vgpu device-plugin --fake-cluster FILE --fake-gpus FILE`: the plugin alone, without an API
server or a GPU; a kubelet that appears in its directory later gets it registered and served."""

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e.device_plugin.harness import NODE, UUID_A, UUID_B, gpu_file_text
from tests.e2e.device_plugin.kubelet import FakeKubelet
from tests.e2e.monitor.test_monitor import wait_for

GRANT = f"{UUID_B},NVIDIA,3000,30:;"


def cluster_file(path: Path) -> Path:
    """The node, locked by a pod the scheduler has bound there (its grant unsigned: the file
    describes a trusted cluster, as for `vgpu scheduler --fake-cluster`)."""
    bound = {
        "hami.io/vgpu-node": NODE,
        "hami.io/vgpu-time": "1700000000",
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
        "hami.io/vgpu-devices-to-allocate": GRANT,
        "hami.io/vgpu-devices-allocated": GRANT,
    }
    container = {"name": "main", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    path.write_text(
        yaml.safe_dump(
            {
                "nodes": [
                    {
                        "name": NODE,
                        "annotations": {"hami.io/mutex.lock": "2026-01-01T00:00:00Z,ml,train"},
                    }
                ],
                "pods": [
                    {
                        "metadata": {
                            "name": "train",
                            "namespace": "ml",
                            "uid": "uid-train",
                            "annotations": bound,
                        },
                        "spec": {
                            "schedulerName": "vgpu-scheduler",
                            "nodeName": NODE,
                            "containers": [container],
                        },
                        "status": {"phase": "Pending"},
                    }
                ],
            }
        )
    )
    return path


@pytest.fixture()
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="vgpu-dp-", dir="/tmp"))  # short socket paths
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_it_registers_the_gpus_and_serves_a_pod_of_the_file_without_a_cluster(
    plugin_dir: Path, tmp_path: Path
) -> None:
    gpus = tmp_path / "gpus.yaml"
    gpus.write_text(gpu_file_text())
    log_file = tmp_path / "plugin.log"
    command = [
        sys.executable, "-m", "vgpu.app.cli", "device-plugin", "--node-name", NODE,
        "--fake-gpus", str(gpus), "--fake-cluster", str(cluster_file(tmp_path / "cluster.yaml")),
        "--plugin-dir", str(plugin_dir), "--hook-path", str(tmp_path / "hook"),
        "--state-dir", str(tmp_path / "state"),
    ]  # fmt: skip
    env = {
        "PATH": "/usr/bin:/bin",
        "VGPU_KUBELET_POLL": "0.05",
        "VGPU_REGISTER_RETRY": "0.2",
        "VGPU_LOCK_DIR": str(tmp_path / "vgpulock"),
        "VGPU_HEALTH_LISTEN": "127.0.0.1:0",  # any free port: tests may run side by side
        "KUBECONFIG": str(tmp_path / "none"),
    }
    kubelet = FakeKubelet(plugin_dir)
    with log_file.open("wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        assert wait_for(lambda: "kubelet.sock does not exist" in log_file.read_text())
        kubelet.start()  # a kubelet that comes later is registered with

        assert kubelet.wait_for(lambda: bool(kubelet.registrations)), log_file.read_text()
        kubelet.admit("uid-train", ["main"])
        (served,) = kubelet.allocate([f"{UUID_B}-0"]).container_responses
        envs = dict(served.envs)
        assert (envs["NVIDIA_VISIBLE_DEVICES"], envs["CUDA_DEVICE_MEMORY_LIMIT_0"]) == (
            UUID_B,
            "3000m",
        )
        assert wait_for(lambda: "Allocate for pod ml/train container main" in log_file.read_text())
        text = log_file.read_text()
        assert text.count("kubelet.sock does not exist") == 1  # said once, not every retry
        registered = text[text.index("in hami.io/node-nvidia-register: ") :].split(": ", 1)[1]
        devices = json.loads(registered.splitlines()[0])
        assert [gpu["id"] for gpu in devices] == [UUID_A, UUID_B]
    finally:
        process.terminate()
        assert process.wait(timeout=15) == 0
        kubelet.stop()
