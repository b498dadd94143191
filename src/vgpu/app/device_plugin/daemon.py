"""Runs the device plugin's loops until asked to stop, then cleans up."""

import logging
import threading

from vgpu.app.device_plugin.health import HealthWatcher
from vgpu.app.device_plugin.keeper import OccupancyKeeper
from vgpu.app.device_plugin.migmanager import MigManager
from vgpu.app.device_plugin.registrar import NodeRegistrar
from vgpu.app.device_plugin.session import KubeletSession
from vgpu.ports.gpu import GpuPort

log = logging.getLogger(__name__)


class DevicePluginDaemon:
    """Node registration, health watching, the occupancy keeper and (on a node with GPUs in MIG
    mode) the release of MIG instances on threads; the kubelet session on the caller's."""

    def __init__(
        self,
        session: KubeletSession,
        registrar: NodeRegistrar,
        health: HealthWatcher,
        gpu_port: GpuPort,
        keeper: OccupancyKeeper,
        kubelet_poll_s: float = 1.0,
        mig: MigManager | None = None,
    ) -> None:
        self._session = session
        self._registrar = registrar
        self._health = health
        self._gpu_port = gpu_port
        self._keeper = keeper
        self._poll = kubelet_poll_s
        self._mig = mig if mig is not None and mig.active else None

    def run(self, stop: threading.Event) -> None:
        """Serve and register, keep it so, until `stop` is set; socket removed on the way out."""
        threads = [
            threading.Thread(target=self._registrar.run, args=(stop,), name="node-registrar"),
            threading.Thread(target=self._health.run, args=(stop,), name="gpu-health"),
            threading.Thread(target=self._keeper.run, args=(stop,), name="occupancy"),
        ]
        if self._mig is not None:
            self._mig.start()  # before serving, as HAMi cleans up before its first Allocate
            threads.append(threading.Thread(target=self._mig.run, args=(stop,), name="mig"))
        for thread in threads:
            thread.daemon = True
            thread.start()
        try:
            self._session.start()
            self._session.run(stop, self._poll)
        finally:
            stop.set()
            self._registrar.wake()
            self._session.stop()
            self._gpu_port.close()
            for thread in threads:
                thread.join(timeout=5.0)
            log.info("device plugin stopped")
