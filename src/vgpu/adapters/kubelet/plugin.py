"""KubeletPort over gRPC on unix sockets: serve the plugin, register, watch for restarts."""

import logging
import os
from concurrent import futures
from pathlib import Path

import grpc

from vgpu.adapters.kubelet import convert
from vgpu.adapters.kubelet.generated import api_pb2 as pb
from vgpu.adapters.kubelet.generated import api_pb2_grpc as pb_grpc
from vgpu.adapters.kubelet.servicer import DevicePluginServicer
from vgpu.adapters.unix_sockets import (
    MAX_SOCKET_PATH,
    FileId,
    file_id,
    remove_stale_socket,
    too_long,
)
from vgpu.ports.kubelet import API_VERSION, DevicePluginHandler, KubeletError, PluginOptions

log = logging.getLogger(__name__)

KUBELET_SOCKET = "kubelet.sock"


class KubeletPlugin:
    """Implements KubeletPort for one resource.

    `plugin_dir` is the kubelet's device-plugin directory (`/var/lib/kubelet/device-plugins`
    on a node, a temp dir in tests); the plugin listens on `<plugin_dir>/<endpoint>` and
    registers with `<plugin_dir>/kubelet.sock`.
    """

    def __init__(
        self,
        plugin_dir: str | Path,
        endpoint: str,
        register_timeout_s: float = 10.0,
        workers: int = 8,
    ) -> None:
        if "/" in endpoint or not endpoint:
            raise ValueError(f"endpoint={endpoint!r} must be a plain socket file name")
        self._dir = Path(plugin_dir)
        self._endpoint = endpoint
        self._timeout = register_timeout_s
        self._workers = workers
        self._server: grpc.Server | None = None
        self._served_id: FileId | None = None
        self._kubelet_id: FileId | None = None

    @property
    def socket_path(self) -> str:
        return str(self._dir / self._endpoint)

    @property
    def kubelet_socket(self) -> str:
        return str(self._dir / KUBELET_SOCKET)

    def serve(self, handler: DevicePluginHandler) -> None:
        self.stop()
        path = self.socket_path
        if too_long(path):
            raise KubeletError(f"socket path {path} is longer than {MAX_SOCKET_PATH} bytes")
        if not self._dir.is_dir():
            raise KubeletError(
                f"device-plugin directory {self._dir} does not exist "
                "(is the kubelet's device-plugins directory mounted?)"
            )
        _remove_socket(path)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._workers))
        servicer = DevicePluginServicer(handler)
        pb_grpc.add_DevicePluginServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
        try:
            server.add_insecure_port(f"unix://{os.path.abspath(path)}")
        except RuntimeError as exc:
            raise KubeletError(f"cannot listen on {path}: {exc}") from exc
        server.start()
        self._server = server
        self._served_id = file_id(path)
        log.info("serving the device plugin on %s", path)

    def register(self, resource_name: str, options: PluginOptions) -> None:
        kubelet = self.kubelet_socket
        identity = file_id(kubelet)
        if identity is None:
            raise KubeletError(
                f"kubelet socket {kubelet} does not exist (is the kubelet running, and is "
                f"{self._dir} the kubelet's device-plugin directory?)"
            )
        request = pb.RegisterRequest(
            version=API_VERSION,
            endpoint=self._endpoint,
            resource_name=resource_name,
            options=convert.options_message(options),
        )
        with grpc.insecure_channel(f"unix://{os.path.abspath(kubelet)}") as channel:
            try:
                stub = pb_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
                stub.Register(request, timeout=self._timeout)
            except grpc.RpcError as exc:
                detail = exc.details() if hasattr(exc, "details") else str(exc)
                raise KubeletError(
                    f"kubelet at {kubelet} refused the registration of {resource_name} "
                    f"(endpoint {self._endpoint}): {exc.code().name}: {detail}"
                ) from exc
        # The identity from before the call: a restart during Register still counts as one.
        self._kubelet_id = identity
        log.info(
            "registered %s with the kubelet at %s (endpoint %s, version %s)",
            resource_name,
            kubelet,
            self._endpoint,
            API_VERSION,
        )

    def kubelet_restarted(self) -> bool:
        if self._server is not None and file_id(self.socket_path) != self._served_id:
            return True
        if self._kubelet_id is None:
            return False
        current = file_id(self.kubelet_socket)
        return current is not None and current != self._kubelet_id

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.stop(grace=0.5).wait()
        # Remove only our own socket: after a kubelet restart the path may be gone already.
        if file_id(self.socket_path) == self._served_id:
            _remove_socket(self.socket_path)
        self._served_id = None
        self._kubelet_id = None
        log.info("stopped serving on %s", self.socket_path)


def _remove_socket(path: str) -> None:
    try:
        remove_stale_socket(path)
    except FileExistsError as exc:
        raise KubeletError(str(exc)) from None
