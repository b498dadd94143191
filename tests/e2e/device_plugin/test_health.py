"""The device plugin's /healthz and /readyz over a real socket: ready only once registered
with the kubelet, not ready (but live) while it waits for the NVIDIA driver, not live once its
kubelet session thread has died or is stuck.

The first test runs the real process. The others run `serve` in this process, with the real
adapters (the API emulator, the fake kubelet over gRPC, the HTTP server) and a fault at the edge:
a GPU port whose driver answers only when told, a kubelet adapter that hangs or kills the thread
that calls it.
"""

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.e2e.device_plugin.harness import NODE, SPLIT, PluginEnv
from tests.e2e.scheduler.harness import wait_until
from vgpu.adapters.fake.gpus import FakeGpus
from vgpu.adapters.kubelet import KubeletPlugin
from vgpu.app.device_plugin.cli import serve
from vgpu.app.device_plugin.config import load_config
from vgpu.app.device_plugin.container import DevicePluginContainer
from vgpu.domain.inventory import GpuInfo
from vgpu.ports.gpu import GpuUnavailable


def _get(url: str) -> tuple[int, str]:
    answer = httpx.get(url, timeout=10)
    return answer.status_code, answer.text


def test_ready_only_once_registered_with_the_kubelet_and_live_all_along(
    plugin_env: PluginEnv,
) -> None:
    plugin_env.start("--health-listen", "127.0.0.1:0")
    assert plugin_env.wait_for_log("serving /healthz and /readyz on "), plugin_env.log()
    found = re.search(r"serving /healthz and /readyz on (http://[\d.]+:\d+)", plugin_env.log())
    assert found is not None
    url = found.group(1)
    missing = f"kubelet socket {plugin_env.plugin_dir}/kubelet.sock does not exist"
    assert plugin_env.wait_for_log(missing)

    status, why = _get(f"{url}/readyz")
    assert status == 503
    assert why.startswith(f"not registered with the kubelet yet: {missing}")
    assert _get(f"{url}/healthz") == (200, "ok\n")

    plugin_env.kubelet.start()
    assert plugin_env.kubelet.wait_for(lambda: bool(plugin_env.kubelet.registrations))

    assert wait_until(lambda: _get(f"{url}/readyz") == (200, "ok\n"))
    assert _get(f"{url}/healthz") == (200, "ok\n")


# in this process, with a fault at the edge ---------------------------------------------------
class LateDriver:
    """A GPU port whose NVML fails as without a driver until `arrive()`."""

    def __init__(self, gpus: FakeGpus) -> None:
        self._gpus = gpus
        self._here = threading.Event()

    def arrive(self) -> None:
        self._here.set()

    def discover(self) -> list[GpuInfo]:
        if not self._here.is_set():
            raise GpuUnavailable("the NVIDIA kernel driver is not loaded")
        return self._gpus.discover()

    def __getattr__(self, name: str) -> object:
        return getattr(self._gpus, name)


class FaultyKubelet(KubeletPlugin):
    """The real kubelet adapter, whose restart check can be made to hang or to kill the
    session thread (as an error the loop does not expect, beyond Exception, would)."""

    def __init__(self, plugin_dir: str, socket_name: str) -> None:
        super().__init__(plugin_dir, socket_name)
        self.hang = threading.Event()
        self.released = threading.Event()
        self.kill = threading.Event()

    def kubelet_restarted(self) -> bool:
        if self.kill.is_set():
            raise SystemExit("injected: the session thread dies")
        if self.hang.is_set():
            self.released.wait(30)
        return super().kubelet_restarted()


@dataclass
class Running:
    container: DevicePluginContainer
    kubelet: FaultyKubelet
    gpus: LateDriver
    url: str
    stop: threading.Event
    thread: threading.Thread

    def probe(self, path: str) -> tuple[int, str]:
        return _get(f"{self.url}{path}")


@pytest.fixture()
def running(plugin_env: PluginEnv) -> Iterator[Running]:
    config = load_config(
        overrides={
            "node_name": NODE,
            "fake_gpus": plugin_env.gpu_file,
            "kubeconfig": plugin_env.kubeconfig,
            "plugin_dir": plugin_env.plugin_dir,
            "hook_path": str(plugin_env.hook),
            "state_dir": plugin_env.state_dir,
            "split_count": SPLIT,
            "lock_dir": str(plugin_env.hook / "vgpulock"),
            "kubelet_poll": 0.05,
            "register_retry": 0.2,
            "health_listen": "127.0.0.1:0",
            "liveness_stall": 1.0,
        }
    )
    container = DevicePluginContainer(config=config)
    kubelet = FaultyKubelet(str(config.plugin_dir), config.socket_name)
    gpus = LateDriver(FakeGpus.from_file(plugin_env.gpu_file))
    container.kubelet.override(kubelet)
    container.gpu_port.override(gpus)
    server = container.probe_server()
    assert server is not None
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(config, container, stop), daemon=True)
    plugin_env.kubelet.start()
    thread.start()
    try:
        yield Running(container, kubelet, gpus, server.url, stop, thread)
    finally:
        kubelet.released.set()
        stop.set()
        thread.join(15)


def test_while_waiting_for_the_driver_it_is_live_and_not_ready_saying_why(
    running: Running, plugin_env: PluginEnv
) -> None:
    waiting = (503, "waiting for the NVIDIA driver: the NVIDIA kernel driver is not loaded\n")
    assert wait_until(lambda: running.probe("/readyz") == waiting)
    assert running.probe("/healthz") == (200, "ok\n")
    assert not plugin_env.kubelet.registrations

    running.gpus.arrive()

    assert wait_until(lambda: running.probe("/readyz") == (200, "ok\n"))
    assert plugin_env.kubelet.registrations


def test_not_live_once_the_kubelet_session_thread_has_died(running: Running) -> None:
    running.gpus.arrive()
    assert wait_until(lambda: running.probe("/readyz") == (200, "ok\n"))

    running.kubelet.kill.set()

    dead = (
        503,
        "the kubelet session thread has stopped: the plugin would not register again after a "
        "kubelet restart\n",
    )
    assert wait_until(lambda: running.probe("/healthz") == dead)
    assert running.probe("/readyz") == dead


def test_not_live_while_a_session_step_is_stuck_and_live_again_once_it_ends(
    running: Running,
) -> None:
    running.gpus.arrive()
    assert wait_until(lambda: running.probe("/readyz") == (200, "ok\n"))

    running.kubelet.hang.set()

    assert wait_until(lambda: running.probe("/healthz")[0] == 503)
    _, why = running.probe("/healthz")
    assert why.startswith("a kubelet session step has been under way for ")
    assert why.endswith(" s (liveness_stall: 1 s)\n")

    running.kubelet.hang.clear()
    running.kubelet.released.set()
    assert wait_until(lambda: running.probe("/healthz") == (200, "ok\n"))
