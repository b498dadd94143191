"""KubeletPlugin (the gRPC adapter) over real unix sockets against the fake kubelet."""

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.e2e.device_plugin.kubelet import FakeKubelet
from vgpu.adapters.kubelet import KubeletPlugin
from vgpu.adapters.kubelet.checkpoint import KubeletCheckpoint
from vgpu.adapters.kubelet.generated import api_pb2 as pb
from vgpu.adapters.kubelet.generated import api_pb2_grpc as pb_grpc
from vgpu.domain.trust import DeviceAssignment
from vgpu.ports.kubelet import (
    ContainerResponse,
    DevicePluginError,
    KubeletError,
    PluginDevice,
    PluginOptions,
    PreferredRequest,
)

OPTIONS = PluginOptions(get_preferred_allocation_available=True)


class Handler:
    def options(self) -> PluginOptions:
        return OPTIONS

    def watch_devices(self, active: Callable[[], bool]) -> Iterator[list[PluginDevice]]:
        yield [PluginDevice("GPU-a-0"), PluginDevice("GPU-a-1", healthy=False, numa=0)]
        while active():
            time.sleep(0.02)

    def preferred_allocation(self, requests: Sequence[PreferredRequest]) -> list[list[str]]:
        return [list(r.available[: r.size]) for r in requests]

    def allocate(self, requests: Sequence[Sequence[str]]) -> list[ContainerResponse]:
        if any("forged" in i for ids in requests for i in ids):
            raise DevicePluginError("card forged is not on this node")
        return [ContainerResponse(envs={"IDS": ",".join(ids)}) for ids in requests]

    def pre_start(self, device_ids: Sequence[str]) -> None:
        return None


def registered(plugin: KubeletPlugin, kubelet: FakeKubelet) -> None:
    """The kubelet runs, and the plugin serves `Handler` and has registered with it."""
    kubelet.start()
    plugin.serve(Handler())
    plugin.register("example.com/gpu", OPTIONS)


@pytest.fixture()
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="vgpu-kp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture()
def kubelet(plugin_dir: Path) -> Iterator[FakeKubelet]:
    fake = FakeKubelet(plugin_dir)
    yield fake
    fake.stop()


@pytest.fixture()
def plugin(plugin_dir: Path) -> Iterator[KubeletPlugin]:
    adapter = KubeletPlugin(plugin_dir, "vgpu-test.sock", register_timeout_s=5)
    yield adapter
    adapter.stop()


def test_serve_then_register_lets_the_kubelet_call_in(
    plugin: KubeletPlugin, kubelet: FakeKubelet
) -> None:
    registered(plugin, kubelet)

    (registration,) = kubelet.registrations
    assert (registration.version, registration.endpoint, registration.resource_name) == (
        "v1beta1",
        "vgpu-test.sock",
        "example.com/gpu",
    )
    assert kubelet.wait_for(lambda: bool(kubelet.device_lists))
    assert kubelet.device_lists[0] == [("GPU-a-0", "Healthy"), ("GPU-a-1", "Unhealthy")]
    assert kubelet.preferred(["x", "y", "z"], size=2) == ["x", "y"]
    kubelet.admit("uid-a", ["main"])
    assert dict(kubelet.allocate(["x", "y"]).container_responses[0].envs) == {"IDS": "x,y"}


def test_a_refusal_reaches_the_kubelet_as_failed_precondition(
    plugin: KubeletPlugin, kubelet: FakeKubelet
) -> None:
    registered(plugin, kubelet)
    kubelet.admit("uid-a", ["main"])

    with pytest.raises(grpc.RpcError) as err:
        kubelet.allocate(["forged-0"])
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert err.value.details() == "card forged is not on this node"


def test_pre_start_answers_empty(plugin: KubeletPlugin, plugin_dir: Path) -> None:
    plugin.serve(Handler())
    with grpc.insecure_channel(f"unix://{plugin_dir}/vgpu-test.sock") as channel:
        stub: Any = pb_grpc.DevicePluginStub(channel)
        reply = stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=["x"]), timeout=5)
    assert reply == pb.PreStartContainerResponse()


def test_a_missing_kubelet_socket_is_named(plugin: KubeletPlugin, plugin_dir: Path) -> None:
    plugin.serve(Handler())
    with pytest.raises(KubeletError, match=f"kubelet socket {plugin_dir}/kubelet.sock does not"):
        plugin.register("example.com/gpu", OPTIONS)


def test_a_refused_registration_names_the_socket_and_the_reason(
    plugin: KubeletPlugin, plugin_dir: Path
) -> None:
    refusing = grpc.server(futures.ThreadPoolExecutor(1))

    class Refuse(pb_grpc.RegistrationServicer):  # type: ignore[misc]
        def Register(self, request: Any, context: grpc.ServicerContext) -> Any:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid name of device plugin socket")

    pb_grpc.add_RegistrationServicer_to_server(Refuse(), refusing)
    refusing.add_insecure_port(f"unix://{plugin_dir}/kubelet.sock")
    refusing.start()
    try:
        plugin.serve(Handler())
        with pytest.raises(KubeletError) as err:
            plugin.register("example.com/gpu", OPTIONS)
    finally:
        refusing.stop(0).wait()
    message = str(err.value)
    assert f"{plugin_dir}/kubelet.sock refused the registration of example.com/gpu" in message
    assert "INVALID_ARGUMENT: invalid name of device plugin socket" in message


def test_a_recreated_kubelet_socket_or_a_removed_plugin_socket_means_restart(
    plugin: KubeletPlugin, kubelet: FakeKubelet, plugin_dir: Path
) -> None:
    registered(plugin, kubelet)
    assert not plugin.kubelet_restarted()

    kubelet.stop()
    kubelet.start()
    assert plugin.kubelet_restarted()

    plugin.serve(Handler())
    plugin.register("example.com/gpu", OPTIONS)
    assert not plugin.kubelet_restarted()
    (plugin_dir / "vgpu-test.sock").unlink()
    assert plugin.kubelet_restarted()


def test_serve_replaces_a_stale_socket_and_stop_removes_it(
    plugin: KubeletPlugin, plugin_dir: Path
) -> None:
    plugin.serve(Handler())
    stale = plugin_dir / "vgpu-test.sock"
    other = KubeletPlugin(plugin_dir, "vgpu-test.sock")
    other.serve(Handler())  # a second start finds the first one's socket and takes over
    assert stale.is_socket()

    other.stop()
    assert not stale.exists()


def test_serve_refuses_to_replace_a_file_that_is_not_a_socket(
    plugin: KubeletPlugin, plugin_dir: Path
) -> None:
    (plugin_dir / "vgpu-test.sock").write_text("precious")
    with pytest.raises(KubeletError, match="exists and is not a socket"):
        plugin.serve(Handler())
    assert (plugin_dir / "vgpu-test.sock").read_text() == "precious"


def test_serve_in_a_missing_directory_says_which(tmp_path: Path) -> None:
    with pytest.raises(KubeletError, match=f"directory {tmp_path}/nope does not exist"):
        KubeletPlugin(tmp_path / "nope", "x.sock").serve(Handler())


def test_the_kubelet_keeps_each_allocation_in_its_checkpoint_as_the_plugin_reads_it(
    plugin: KubeletPlugin, kubelet: FakeKubelet, plugin_dir: Path
) -> None:
    registered(plugin, kubelet)
    assert kubelet.wait_for(lambda: bool(kubelet.device_lists))
    kubelet.admit("uid-a", ["init", "main"])

    kubelet.allocate(["GPU-a-0"])
    with pytest.raises(grpc.RpcError):
        kubelet.allocate(["forged-0"])  # refused: the kubelet keeps nothing of it
    kubelet.allocate(["GPU-a-0", "GPU-a-1"])

    assert KubeletCheckpoint(plugin_dir).assignments() == (
        DeviceAssignment("uid-a", "init", "example.com/gpu", ("GPU-a-0",), {"IDS": "GPU-a-0"}),
        DeviceAssignment(
            "uid-a", "main", "example.com/gpu", ("GPU-a-0", "GPU-a-1"), {"IDS": "GPU-a-0,GPU-a-1"}
        ),
    )
    raw = json.loads((plugin_dir / "kubelet_internal_checkpoint").read_text())
    assert list(raw) == ["Data", "Checksum"]
    assert raw["Data"]["PodDeviceEntries"][1]["DeviceIDs"] == {"-1": ["GPU-a-0"], "0": ["GPU-a-1"]}
    assert raw["Data"]["RegisteredDevices"] == {"example.com/gpu": ["GPU-a-0"]}  # healthy ones

    kubelet.restart()  # the kubelet reads its checkpoint back and keeps writing it whole
    plugin.serve(Handler())
    plugin.register("example.com/gpu", OPTIONS)
    assert kubelet.wait_for(lambda: len(kubelet.device_lists) >= 2)
    assert len(KubeletCheckpoint(plugin_dir).assignments()) == 2
