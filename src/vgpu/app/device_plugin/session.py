"""Keeps the plugin served and registered with the kubelet, across kubelet restarts.

`tick()` is one step of the loop `run()` drives: serve and register when not registered yet
(retrying after `retry_s` on failure), and when the kubelet was restarted (its socket
re-created, ours removed) serve again and register again. Serving always comes first: the
kubelet dials the plugin while it handles Register. A failure is logged as an error once, and
again only when its reason changes, so a node whose kubelet is not up yet (or a fake-cluster
run without one) does not fill the log. `stalled_for()` says how long the step under way has
taken (0 between steps), for the liveness probe.
"""

import logging
import threading
import time
from collections.abc import Callable

from vgpu.ports.kubelet import DevicePluginHandler, KubeletError, KubeletPort, PluginOptions

log = logging.getLogger(__name__)


class KubeletSession:
    def __init__(
        self,
        kubelet: KubeletPort,
        handler: DevicePluginHandler,
        resource_name: str,
        options: PluginOptions,
        retry_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kubelet = kubelet
        self._handler = handler
        self._resource = resource_name
        self._options = options
        self._retry = retry_s
        self._clock = clock
        self._registered = False
        self._needs_serve = True
        self._next_attempt = 0.0
        self._last_failure = ""
        self._step_began: float | None = None
        self.registrations = 0

    @property
    def registered(self) -> bool:
        return self._registered

    @property
    def resource_name(self) -> str:
        return self._resource

    @property
    def failure(self) -> str:
        """Why the last attempt to serve or register failed; empty once registered."""
        return self._last_failure

    def stalled_for(self) -> float:
        """Seconds the step under way has taken so far; 0 when none is under way."""
        began = self._step_began
        return 0.0 if began is None else max(self._clock() - began, 0.0)

    def start(self) -> None:
        """Serve and try to register once; failures are logged and retried by `tick`."""
        self._needs_serve = True
        self.tick()

    def tick(self) -> None:
        self._step_began = self._clock()
        try:
            self._tick()
        finally:
            self._step_began = None

    def _tick(self) -> None:
        if self._registered:
            if not self._kubelet.kubelet_restarted():
                return
            log.warning(
                "the kubelet restarted (kubelet.sock re-created or %s removed); "
                "serving and registering again",
                self._kubelet.socket_path,
            )
            self._registered = False
            self._needs_serve = True
            self._next_attempt = 0.0
        if self._clock() < self._next_attempt:
            return
        if self._needs_serve or self._kubelet.kubelet_restarted():
            try:
                self._kubelet.serve(self._handler)
            except KubeletError as exc:
                self._needs_serve = True
                self._postpone(f"cannot serve the device plugin: {exc}")
                return
            self._needs_serve = False
        self._try_register()

    def run(self, stop: threading.Event, poll_s: float = 1.0) -> None:
        while not stop.wait(poll_s):
            try:
                self.tick()
            except Exception:  # the loop that keeps us registered must survive a surprise
                log.exception("kubelet session step failed")

    def stop(self) -> None:
        self._kubelet.stop()
        self._registered = False

    def _try_register(self) -> None:
        try:
            self._kubelet.register(self._resource, self._options)
        except KubeletError as exc:
            self._postpone(str(exc))
            return
        self._registered = True
        self._last_failure = ""
        self.registrations += 1

    def _postpone(self, reason: str) -> None:
        level = logging.DEBUG if reason == self._last_failure else logging.ERROR
        log.log(level, "%s; retrying every %.0f s", reason, self._retry)
        self._last_failure = reason
        self._next_attempt = self._clock() + self._retry
