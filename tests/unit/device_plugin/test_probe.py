"""scripts/plugin_probe.py's pieces that need no GPU: the answer applied as a runtime would,
the bound pod it writes for the plugin, and its exit when there is no GPU."""

import runpy
from pathlib import Path
from typing import Any

import pytest
import yaml

from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.app.fake_mode import load_fake_cluster
from vgpu.domain import NVIDIA

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "plugin_probe.py"


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    return runpy.run_path(str(SCRIPT))


def test_without_a_gpu_it_says_skip_and_exits_2(
    probe: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert probe["main"]([]) == 2  # this machine has no NVIDIA driver
    assert capsys.readouterr().out.startswith("plugin_probe: SKIP no usable GPU: ")


def test_a_path_under_a_mount_is_read_on_the_host_the_longest_mount_first(
    probe: dict[str, Any],
) -> None:
    envs = {
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/usr/local/vgpu/abc.cache",
        "CUDA_DEVICE_MEMORY_LIMIT_0": "1024m",
        "NVIDIA_VISIBLE_DEVICES": "GPU-1",
    }
    mounts = {
        "/usr/local/vgpu": "/host/vgpu/containers/uid_main",
        "/usr/local/vgpu/libvgpu.so": "/host/vgpu/libvgpu.so",
    }
    assert probe["_applied_env"](envs, mounts) == {
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/host/vgpu/containers/uid_main/abc.cache",
        "CUDA_DEVICE_MEMORY_LIMIT_0": "1024m",
        "NVIDIA_VISIBLE_DEVICES": "GPU-1",
        "CUDA_VISIBLE_DEVICES": "GPU-1",
    }


def test_the_cluster_file_binds_one_pod_with_the_grant_the_plugin_serves(
    probe: dict[str, Any], tmp_path: Path
) -> None:
    grant = "GPU-1,NVIDIA,1024,50:;"
    path = probe["_cluster_file"](tmp_path / "cluster.yaml", grant)
    cluster: FakeCluster = load_fake_cluster(path, NVIDIA)
    [pod] = cluster.list_pods()
    assert (pod.key, pod.node_name) == ("default/probe", probe["NODE"])
    assert pod.annotations["hami.io/vgpu-devices-to-allocate"] == grant
    assert yaml.safe_load(path.read_text())["nodes"][0]["annotations"]["hami.io/mutex.lock"]
