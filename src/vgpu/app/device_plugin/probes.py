"""What the device plugin's health endpoint answers (`/healthz`, `/readyz`).

Live: the process answers, and once it serves, its kubelet session thread is running and no
step of it (serving the socket, registering, checking for a kubelet restart) has been stuck for
longer than `stall_limit` seconds. A plugin that is not live can no longer re-register after a
kubelet restart, so the kubelet should restart it. While starting (waiting for the NVIDIA
driver, say) it is live: the wait is going on as it should.

Ready: registered with the kubelet and serving the device plugin on its socket, and live. Not
ready says why: still waiting for the NVIDIA driver, starting, not registered yet (with the
reason of the last failed attempt), or not live.
"""

import threading

from vgpu.app.device_plugin.session import KubeletSession


class PluginProbes:
    """Thread-safe: the HTTP server's threads read what the main thread sets."""

    def __init__(self, stall_limit: float) -> None:
        self._stall_limit = stall_limit
        self._lock = threading.Lock()
        self._waiting = "starting"
        self._session: KubeletSession | None = None
        self._thread: threading.Thread | None = None

    def waiting(self, why: str) -> None:
        """Not serving yet, because of `why` (readiness says so)."""
        with self._lock:
            self._waiting = why

    def serving(self, session: KubeletSession, thread: threading.Thread) -> None:
        """From now on, judge `session`, run by `thread`."""
        with self._lock:
            self._session, self._thread = session, thread

    def liveness(self) -> str:
        """Empty when live, else why not."""
        with self._lock:
            session, thread = self._session, self._thread
        if session is None or thread is None:
            return ""
        if not thread.is_alive():
            return (
                "the kubelet session thread has stopped: the plugin would not register again "
                "after a kubelet restart"
            )
        stalled = session.stalled_for()
        if stalled > self._stall_limit:
            return (
                f"a kubelet session step has been under way for {stalled:.0f} s "
                f"(liveness_stall: {self._stall_limit:.0f} s)"
            )
        return ""

    def readiness(self) -> str:
        """Empty when ready, else why not."""
        with self._lock:
            session, waiting = self._session, self._waiting
        if session is None:
            return waiting
        dead = self.liveness()
        if dead:
            return dead
        if not session.registered:
            return f"not registered with the kubelet yet: {session.failure or 'registering'}"
        return ""
