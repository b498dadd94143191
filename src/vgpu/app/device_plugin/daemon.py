"""Runs the device plugin's loops until asked to stop, then cleans up."""

import logging
import threading

from vgpu.app.device_plugin.health import HealthWatcher
from vgpu.app.device_plugin.keeper import OccupancyKeeper
from vgpu.app.device_plugin.migmanager import MigManager
from vgpu.app.device_plugin.probes import PluginProbes
from vgpu.app.device_plugin.registrar import NodeRegistrar
from vgpu.app.device_plugin.session import KubeletSession
from vgpu.ports.gpu import GpuPort

log = logging.getLogger(__name__)


class DevicePluginDaemon:
    """Node registration, health watching, the occupancy keeper, the kubelet session and (on a
    node with GPUs in MIG mode) the release of MIG instances, each on its own thread; the
    caller's waits for the stop and then cleans up. The session thread is handed to `probes`,
    whose liveness fails when it stops or gets stuck."""

    def __init__(
        self,
        session: KubeletSession,
        registrar: NodeRegistrar,
        health: HealthWatcher,
        gpu_port: GpuPort,
        keeper: OccupancyKeeper,
        probes: PluginProbes,
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
        self._probes = probes

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
        session = threading.Thread(
            target=self._keep_session, args=(stop,), name="kubelet-session", daemon=True
        )
        self._probes.serving(self._session, session)
        session.start()
        try:
            stop.wait()
        finally:
            stop.set()
            self._registrar.wake()
            session.join(timeout=5.0)
            self._session.stop()
            self._gpu_port.close()
            for thread in threads:
                thread.join(timeout=5.0)
            log.info("device plugin stopped")

    def _keep_session(self, stop: threading.Event) -> None:
        try:
            self._session.start()
            self._session.run(stop, self._poll)
        except BaseException:  # the thread ends here; /healthz fails from now on
            log.critical("the kubelet session thread stopped", exc_info=True)
