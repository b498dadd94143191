"""A fake kubelet for tests: the `v1beta1.Registration` server on `kubelet.sock`, and a plugin client.

Like the real kubelet, while handling Register it dials the plugin's socket, calls
GetDevicePluginOptions and keeps those options, then reads ListAndWatch in the background.
`restart()` does what a kubelet restart does to the directory: its socket goes away, every
other socket in the directory is removed, and a new `kubelet.sock` appears.

Like the kubelet's device manager it keeps `kubelet_internal_checkpoint` in the directory
(`checkpoint.py`): rewritten after each Allocate that succeeds and each device list a plugin
sends, read back at start. The kubelet allocates devices to a pod it admits: `admit(uid,
containers)` names that pod, and each container request of the following Allocate calls is the
next of its containers.
"""

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from tests.e2e.device_plugin.checkpoint import DeviceCheckpoint
from vgpu.adapters.kubelet.generated import api_pb2 as pb
from vgpu.adapters.kubelet.generated import api_pb2_grpc as pb_grpc

DeviceList = list[tuple[str, str]]  # (ID, health) as sent
NumaList = dict[str, tuple[int, ...]]  # ID -> the NUMA node IDs of its topology, as sent


@dataclass(frozen=True)
class Registration:
    version: str
    endpoint: str
    resource_name: str
    requested_preferred: bool  # options inside RegisterRequest
    preferred_available: bool  # options from GetDevicePluginOptions (what kubelet keeps)
    pre_start_required: bool


class FakeKubelet:
    def __init__(self, plugin_dir: Path) -> None:
        self.dir = plugin_dir
        self.socket = plugin_dir / "kubelet.sock"
        self._cond = threading.Condition()
        self._registrations: list[Registration] = []
        self._lists: list[DeviceList] = []
        self._numa: list[NumaList] = []
        self._server: grpc.Server | None = None
        self._channels: list[grpc.Channel] = []
        self._streams: list[Any] = []
        self._stub: Any = None
        self._resource = ""  # what the plugin that registered last serves
        self.checkpoint = DeviceCheckpoint(plugin_dir)
        self._admitting: tuple[str, deque[str]] | None = None

    # lifecycle ------------------------------------------------------------------------------
    def start(self) -> "FakeKubelet":
        self.checkpoint.restore()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        server.add_insecure_port(f"unix://{self.socket}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        with self._cond:
            streams, self._streams = self._streams, []
            channels, self._channels = self._channels, []
        for stream in streams:
            stream.cancel()
        for channel in channels:
            channel.close()
        if self._server is not None:
            self._server.stop(grace=0).wait()
            self._server = None
        self.socket.unlink(missing_ok=True)

    def restart(self) -> None:
        self.stop()
        for path in self.dir.iterdir():
            if path.is_socket():
                path.unlink()
        time.sleep(0.05)  # let the plugin see the directory empty, as during a real restart
        self.start()

    # what the plugin told us ------------------------------------------------------------------
    @property
    def registrations(self) -> list[Registration]:
        with self._cond:
            return list(self._registrations)

    @property
    def device_lists(self) -> list[DeviceList]:
        with self._cond:
            return list(self._lists)

    @property
    def numa_lists(self) -> list[NumaList]:
        """Each ListAndWatch answer's devices with their topology's NUMA nodes (no topology:
        an empty tuple)."""
        with self._cond:
            return list(self._numa)

    def wait_for(self, condition: Callable[[], bool], timeout: float = 15.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    def admit(self, uid: str, containers: Sequence[str]) -> None:
        """The pod whose containers the next Allocate calls are for, in this order."""
        with self._cond:
            self._admitting = (uid, deque(containers))

    # calls the kubelet makes ------------------------------------------------------------------
    def allocate(self, *containers: list[str]) -> Any:
        """Allocate for the next containers of the pod admitted; the checkpoint keeps what the
        plugin answered once it has answered."""
        with self._cond:
            if self._admitting is None or len(self._admitting[1]) < len(containers):
                raise AssertionError("the kubelet allocates only to containers of a pod it admits")
            uid, names = self._admitting[0], list(self._admitting[1])[: len(containers)]
            resource = self._resource
        request = pb.AllocateRequest(
            container_requests=[pb.ContainerAllocateRequest(devices_ids=ids) for ids in containers]
        )
        reply = self._plugin().Allocate(request, timeout=15)
        with self._cond:
            if self._admitting is not None and self._admitting[0] == uid:
                for _ in names:
                    self._admitting[1].popleft()
        for name, ids, answer in zip(names, containers, reply.container_responses, strict=True):
            self.checkpoint.allocated(uid, name, resource, ids, answer)
        return reply

    def preferred(self, available: list[str], size: int) -> list[str]:
        request = pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=available, allocation_size=size
                )
            ]
        )
        reply = self._plugin().GetPreferredAllocation(request, timeout=15)
        return list(reply.container_responses[0].deviceIDs)

    # internals --------------------------------------------------------------------------------
    def _plugin(self) -> Any:
        with self._cond:
            if self._stub is None:
                raise AssertionError("no plugin has registered")
            return self._stub

    def connect(self, request: Any) -> None:
        channel = grpc.insecure_channel(f"unix://{self.dir / request.endpoint}")
        stub = pb_grpc.DevicePluginStub(channel)
        options = stub.GetDevicePluginOptions(pb.Empty(), timeout=5)
        stream = stub.ListAndWatch(pb.Empty())
        with self._cond:
            self._channels.append(channel)
            self._streams.append(stream)
            self._stub = stub
            self._resource = request.resource_name
            self._registrations.append(
                Registration(
                    version=request.version,
                    endpoint=request.endpoint,
                    resource_name=request.resource_name,
                    requested_preferred=request.options.get_preferred_allocation_available,
                    preferred_available=options.get_preferred_allocation_available,
                    pre_start_required=options.pre_start_required,
                )
            )
            self._cond.notify_all()
        threading.Thread(
            target=self._read, args=(stream, request.resource_name), daemon=True
        ).start()

    def _read(self, stream: Any, resource: str) -> None:
        try:
            for response in stream:
                self.checkpoint.listed(resource, response.devices)
                with self._cond:
                    self._lists.append([(d.ID, d.health) for d in response.devices])
                    self._numa.append(
                        {d.ID: tuple(n.ID for n in d.topology.nodes) for d in response.devices}
                    )
                    self._cond.notify_all()
        except grpc.RpcError:
            return  # cancelled by stop(), or the plugin went away


class _Registration(pb_grpc.RegistrationServicer):  # type: ignore[misc]
    def __init__(self, kubelet: FakeKubelet) -> None:
        self._kubelet = kubelet

    def Register(self, request: Any, context: grpc.ServicerContext) -> Any:
        if request.version != "v1beta1":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"version {request.version}")
        try:
            self._kubelet.connect(request)
        except grpc.RpcError as exc:
            context.abort(grpc.StatusCode.UNKNOWN, f"cannot dial the plugin: {exc}")
        return pb.Empty()
