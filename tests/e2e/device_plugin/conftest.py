"""The real `vgpu device-plugin` process against the API emulator and a fake kubelet.

`plugin_env` builds a node, a fake GPU file and a plugin directory (short, under /tmp, so the
socket paths stay within the 107-byte limit); `start_plugin()` starts the process with them and
stops it (SIGTERM) after the test; its log shows with a failing test's output.
"""

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.device_plugin.harness import NODE, PluginEnv, gpu_file_text, key_secret_manifest
from tests.e2e.device_plugin.kubelet import FakeKubelet
from tests.e2e.k8s_emulator import RunningApiServer, node_manifest


@pytest.fixture()
def plugin_env(k8s_api: RunningApiServer, tmp_path: Path) -> Iterator[PluginEnv]:
    plugin_dir = Path(tempfile.mkdtemp(prefix="vgpu-dp-", dir="/tmp"))
    k8s_api.create("/api/v1/nodes", node_manifest(NODE))
    k8s_api.create("/api/v1/namespaces/vgpu-system/secrets", key_secret_manifest())
    gpu_file = tmp_path / "gpus.yaml"
    gpu_file.write_text(gpu_file_text())
    env = PluginEnv(
        api=k8s_api,
        kubelet=FakeKubelet(plugin_dir),
        plugin_dir=plugin_dir,
        hook=tmp_path / "hook",
        gpu_file=gpu_file,
        kubeconfig=k8s_api.kubeconfig(tmp_path / "kubeconfig"),
        log_file=tmp_path / "device-plugin.log",
        state_dir=tmp_path / "state",
    )
    try:
        yield env
    finally:
        for process in env.processes:
            env.stop(process)
        env.kubelet.stop()
        shutil.rmtree(plugin_dir, ignore_errors=True)
        print(f"--- vgpu device-plugin log ---\n{env.log()}")  # pytest shows it on failure


@pytest.fixture()
def start_plugin(plugin_env: PluginEnv) -> Callable[..., PluginEnv]:
    """Start the kubelet and the plugin; returns once the plugin has registered."""

    def start(*extra: str, kubelet: bool = True) -> PluginEnv:
        if kubelet:
            plugin_env.kubelet.start()
        plugin_env.start(*extra)
        if kubelet:
            registered = plugin_env.kubelet.wait_for(lambda: bool(plugin_env.kubelet.registrations))
            assert registered, f"the plugin never registered:\n{plugin_env.log()}"
        return plugin_env

    return start
