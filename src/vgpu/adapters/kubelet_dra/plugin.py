"""DraKubeletPort over gRPC on unix sockets.

The kubelet finds a DRA driver the other way round from a device plugin: the driver serves
`pluginregistration.Registration` on `<registry dir>/<driver>-reg.sock`, the kubelet's plugin
watcher notices the new socket, calls GetInfo, connects to the endpoint it names
(`<plugin dir>/dra.sock`, serving `DRAPlugin` v1 and v1beta1 and `DRAResourceHealth`) and
reports back with NotifyRegistrationStatus. The plugin socket is served first, so the kubelet
never finds a registration that points at nothing.
"""

import logging
import os
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

import grpc

from vgpu.adapters.kubelet_dra.generated import dra_health_v1alpha1_pb2_grpc as health_grpc
from vgpu.adapters.kubelet_dra.generated import dra_v1_pb2_grpc as v1_grpc
from vgpu.adapters.kubelet_dra.generated import dra_v1beta1_pb2_grpc as v1beta1_grpc
from vgpu.adapters.kubelet_dra.generated import pluginregistration_v1_pb2_grpc as reg_grpc
from vgpu.adapters.kubelet_dra.servicer import (
    DraHealth,
    DraPluginV1,
    DraPluginV1beta1,
    Registration,
)
from vgpu.adapters.unix_sockets import (
    MAX_SOCKET_PATH,
    FileId,
    file_id,
    remove_stale_socket,
    too_long,
)
from vgpu.ports.dra import DraKubeletError, DraPluginHandler

log = logging.getLogger(__name__)

PLUGIN_SOCKET = "dra.sock"


def registration_socket_name(driver: str) -> str:
    return f"{driver}-reg.sock"


class DraKubeletPlugin:
    """Implements DraKubeletPort for one driver. `registry_dir` is the kubelet's plugin
    registry (`/var/lib/kubelet/plugins_registry`), `plugin_dir` the driver's own directory
    (`/var/lib/kubelet/plugins/<driver>`, made when missing)."""

    def __init__(
        self, driver: str, registry_dir: str | Path, plugin_dir: str | Path, workers: int = 8
    ) -> None:
        self._driver = driver
        self._registry_dir = Path(registry_dir)
        self._plugin_dir = Path(plugin_dir)
        self._workers = workers
        self._servers: list[grpc.Server] = []
        self._served: dict[str, FileId | None] = {}

    @property
    def plugin_socket(self) -> str:
        return str(self._plugin_dir / PLUGIN_SOCKET)

    @property
    def registration_socket(self) -> str:
        return str(self._registry_dir / registration_socket_name(self._driver))

    def serve(self, handler: DraPluginHandler) -> None:
        self.stop()
        if not self._registry_dir.is_dir():
            raise DraKubeletError(
                f"plugin registry directory {self._registry_dir} does not exist (is the "
                "kubelet's plugins_registry directory mounted?)"
            )
        try:
            self._plugin_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DraKubeletError(
                f"cannot make the plugin directory {self._plugin_dir}: {exc.strerror or exc}"
            ) from None
        self._start(self.plugin_socket, lambda server: _add_plugin(server, handler))
        endpoint = os.path.abspath(self.plugin_socket)
        registration = Registration(handler, self._driver, endpoint)
        self._start(
            self.registration_socket,
            lambda server: reg_grpc.add_RegistrationServicer_to_server(  # type: ignore[no-untyped-call]
                registration, server
            ),
        )
        log.info(
            "serving DRA driver %s on %s, registration on %s",
            self._driver,
            self.plugin_socket,
            self.registration_socket,
        )

    def sockets_present(self) -> bool:
        return bool(self._served) and all(file_id(p) == i for p, i in self._served.items())

    def stop(self) -> None:
        servers, self._servers = self._servers, []
        served, self._served = self._served, {}
        for server in reversed(servers):  # registration first: the kubelet stops finding us
            server.stop(grace=0.5).wait()
        for path, identity in served.items():
            if file_id(path) == identity:  # only our own file: another may have replaced it
                _remove(path)
        if servers:
            log.info("stopped serving DRA driver %s", self._driver)

    def _start(self, path: str, add: Callable[[grpc.Server], None]) -> None:
        if too_long(path):
            raise DraKubeletError(f"socket path {path} is longer than {MAX_SOCKET_PATH} bytes")
        _remove(path)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._workers))
        add(server)
        try:
            server.add_insecure_port(f"unix://{os.path.abspath(path)}")
        except RuntimeError as exc:
            raise DraKubeletError(f"cannot listen on {path}: {exc}") from exc
        server.start()
        self._servers.append(server)
        self._served[path] = file_id(path)


def _add_plugin(server: grpc.Server, handler: DraPluginHandler) -> None:
    v1_grpc.add_DRAPluginServicer_to_server(DraPluginV1(handler), server)  # type: ignore[no-untyped-call]
    v1beta1_grpc.add_DRAPluginServicer_to_server(DraPluginV1beta1(handler), server)  # type: ignore[no-untyped-call]
    health_grpc.add_DRAResourceHealthServicer_to_server(DraHealth(handler), server)  # type: ignore[no-untyped-call]


def _remove(path: str) -> None:
    try:
        remove_stale_socket(path)
    except FileExistsError as exc:
        raise DraKubeletError(str(exc)) from None
    except OSError as exc:
        raise DraKubeletError(f"cannot remove the stale socket {path}: {exc.strerror}") from None
