"""Runs the DRA driver until asked to stop: the kubelet's sockets on the caller's thread (served
again if someone removes them), the slice publisher, the GPU health watcher and the sweeper on
threads."""

import logging
import threading

from vgpu.app.device_plugin.health import HealthWatcher
from vgpu.app.dra_driver.gpus import DraGpus
from vgpu.app.dra_driver.prepare import ClaimPreparer
from vgpu.app.dra_driver.service import DraDriverService
from vgpu.app.dra_driver.slices import SlicePublisher
from vgpu.app.dra_driver.sweeper import ClaimSweeper
from vgpu.ports.dra import DraKubeletError, DraKubeletPort
from vgpu.ports.gpu import GpuPort

log = logging.getLogger(__name__)


class DraDriverDaemon:
    def __init__(
        self,
        kubelet: DraKubeletPort,
        service: DraDriverService,
        preparer: ClaimPreparer,
        publisher: SlicePublisher,
        health: HealthWatcher,
        sweeper: ClaimSweeper,
        gpus: DraGpus,
        gpu_port: GpuPort,
        socket_check_s: float = 1.0,
    ) -> None:
        self._kubelet = kubelet
        self._service = service
        self._preparer = preparer
        self._publisher = publisher
        self._health = health
        self._sweeper = sweeper
        self._gpus = gpus
        self._gpu_port = gpu_port
        self._check = socket_check_s

    def run(self, stop: threading.Event) -> None:
        """Restore what was prepared, serve, publish; until `stop` is set. HostFileError or
        DraKubeletError when it cannot start."""
        self._preparer.restore()
        threads = [
            threading.Thread(target=self._publisher.run, args=(stop,), name="slice-publisher"),
            threading.Thread(target=self._health.run, args=(stop,), name="gpu-health"),
            threading.Thread(target=self._sweeper.run, args=(stop,), name="claim-sweeper"),
        ]
        try:
            self._kubelet.serve(self._service)
            for thread in threads:
                thread.daemon = True
                thread.start()
            while not stop.wait(self._check):
                if not self._kubelet.sockets_present():
                    log.warning("the DRA driver's sockets were removed; serving them again")
                    self._serve_again()
        finally:
            stop.set()
            self._gpus.wake()
            self._kubelet.stop()
            self._gpu_port.close()
            for thread in threads:
                if thread.is_alive():
                    thread.join(timeout=5.0)
            log.info("DRA driver stopped")

    def _serve_again(self) -> None:
        try:
            self._kubelet.serve(self._service)
        except DraKubeletError as exc:
            log.error("cannot serve the DRA driver's sockets: %s", exc)
