"""The real `vgpu dra-driver` process against the API emulator and a fake kubelet.

`driver_env` makes the driver's directories under a short /tmp path (socket paths stay within
the 107-byte limit), a fake GPU file and a kubeconfig for the emulator; every process started
is stopped (SIGTERM) after the test, and its log shows with a failing test's output.
"""

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.dra.harness import DriverEnv, gpu_file_text
from tests.e2e.dra.kubelet import FakeDraKubelet
from tests.e2e.k8s_emulator import RunningApiServer, node_manifest


@pytest.fixture()
def driver_env(k8s_api: RunningApiServer, tmp_path: Path) -> Iterator[DriverEnv]:
    root = Path(tempfile.mkdtemp(prefix="vgpu-dra-", dir="/tmp"))
    (root / "registry").mkdir()
    k8s_api.create("/api/v1/nodes", node_manifest("gpu-node-1"))
    gpu_file = tmp_path / "gpus.yaml"
    gpu_file.write_text(gpu_file_text())
    env = DriverEnv(
        api=k8s_api,
        root=root,
        kubelet=FakeDraKubelet(root / "registry"),
        gpu_file=gpu_file,
        kubeconfig=k8s_api.kubeconfig(tmp_path / "kubeconfig"),
        log_file=tmp_path / "dra-driver.log",
    )
    try:
        yield env
    finally:
        env.kubelet.close()
        for process in env.processes:
            env.stop(process)
        shutil.rmtree(root, ignore_errors=True)
        print(f"--- vgpu dra-driver log ---\n{env.log()}")  # pytest shows it on failure
