"""A fake kubelet for the DRA driver, over the real unix sockets.

Like the kubelet's plugin watcher, `discover()` waits for a `*-reg.sock` in the registry
directory, calls GetInfo, checks the answer (type DRAPlugin, a DRAPlugin version it speaks),
dials the endpoint the driver names and reports back with NotifyRegistrationStatus. Then
`prepare` and `unprepare` call NodePrepareResources and NodeUnprepareResources (v1, or v1beta1
as a 1.32-1.33 kubelet), and `watch_health()` keeps a NodeWatchResources stream open in the
background, as a kubelet with DRAResourceHealthStatus does.
"""

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from vgpu.adapters.kubelet_dra.generated import dra_health_v1alpha1_pb2 as health_pb
from vgpu.adapters.kubelet_dra.generated import dra_health_v1alpha1_pb2_grpc as health_grpc
from vgpu.adapters.kubelet_dra.generated import dra_v1_pb2 as v1_pb
from vgpu.adapters.kubelet_dra.generated import dra_v1_pb2_grpc as v1_grpc
from vgpu.adapters.kubelet_dra.generated import dra_v1beta1_pb2 as v1beta1_pb
from vgpu.adapters.kubelet_dra.generated import dra_v1beta1_pb2_grpc as v1beta1_grpc
from vgpu.adapters.kubelet_dra.generated import pluginregistration_v1_pb2 as reg_pb
from vgpu.adapters.kubelet_dra.generated import pluginregistration_v1_pb2_grpc as reg_grpc


@dataclass(frozen=True)
class Prepared:
    """One claim's answer, as plain values."""

    error: str
    devices: tuple[tuple[tuple[str, ...], str, str, tuple[str, ...], str | None], ...] = ()

    @property
    def cdi_ids(self) -> list[str]:
        return [i for device in self.devices for i in device[3]]


@dataclass
class FakeDraKubelet:
    registry: Path
    info: Any = None
    endpoint: str = ""
    health: list[tuple[str, int, str]] = field(default_factory=list)  # (device, health, msg)
    _channel: grpc.Channel | None = None
    _stream: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def discover(self, timeout: float = 20.0) -> Any:
        """Register the driver whose socket appears in the registry; its PluginInfo."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sockets = [p for p in self.registry.glob("*-reg.sock") if p.is_socket()]
            if sockets:
                try:
                    return self._register(sockets[0])
                except grpc.RpcError:
                    pass  # the server is still starting
            time.sleep(0.05)
        raise AssertionError(f"no registration socket appeared in {self.registry}")

    def _register(self, socket: Path) -> Any:
        with grpc.insecure_channel(f"unix://{socket}") as channel:
            stub = reg_grpc.RegistrationStub(channel)
            info = stub.GetInfo(reg_pb.InfoRequest(), timeout=5)
            ok = info.type == "DRAPlugin" and "v1.DRAPlugin" in info.supported_versions
            stub.NotifyRegistrationStatus(
                reg_pb.RegistrationStatus(
                    plugin_registered=ok, error="" if ok else "unsupported plugin"
                ),
                timeout=5,
            )
        self.info = info
        self.endpoint = info.endpoint
        self.close()
        self._channel = grpc.insecure_channel(f"unix://{self.endpoint}")
        return info

    def prepare(self, *claims: tuple[str, str, str], beta: bool = False) -> dict[str, Prepared]:
        """(namespace, name, uid) of each claim -> the driver's answer, by uid."""
        pb, stub = self._api(beta)
        request = pb.NodePrepareResourcesRequest(
            claims=[pb.Claim(namespace=ns, name=name, uid=uid) for ns, name, uid in claims]
        )
        response = stub.NodePrepareResources(request, timeout=20)
        return {
            uid: Prepared(
                answer.error,
                tuple(
                    (
                        tuple(d.request_names),
                        d.pool_name,
                        d.device_name,
                        tuple(d.cdi_device_ids),
                        d.share_id if not beta and d.HasField("share_id") else None,
                    )
                    for d in answer.devices
                ),
            )
            for uid, answer in response.claims.items()
        }

    def unprepare(self, *claims: tuple[str, str, str]) -> dict[str, str]:
        pb, stub = self._api(False)
        request = pb.NodeUnprepareResourcesRequest(
            claims=[pb.Claim(namespace=ns, name=name, uid=uid) for ns, name, uid in claims]
        )
        response = stub.NodeUnprepareResources(request, timeout=20)
        return {uid: answer.error for uid, answer in response.claims.items()}

    def watch_health(self) -> None:
        """Open NodeWatchResources and collect what it sends, in the background."""
        stub = health_grpc.DRAResourceHealthStub(self._connected())
        self._stream = stub.NodeWatchResources(health_pb.NodeWatchResourcesRequest())

        def read() -> None:
            try:
                for message in self._stream:
                    with self._lock:
                        self.health += [
                            (d.device.device_name, d.health, d.message) for d in message.devices
                        ]
            except grpc.RpcError:
                pass  # the stream ended (the driver stopped, or we closed it)

        threading.Thread(target=read, daemon=True).start()

    def health_of(self, device: str) -> int | None:
        with self._lock:
            found = [h for d, h, _ in self.health if d == device]
        return found[-1] if found else None

    def close(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _connected(self) -> grpc.Channel:
        if self._channel is None:
            raise AssertionError("discover() the driver first")
        return self._channel

    def _api(self, beta: bool) -> tuple[Any, Any]:
        channel = self._connected()
        if beta:
            return v1beta1_pb, v1beta1_grpc.DRAPluginStub(channel)
        return v1_pb, v1_grpc.DRAPluginStub(channel)
