"""The monitor's HTTP port: `GET /metrics` (Prometheus text), `/healthz` and `/readyz`.

`/healthz` answers while the process runs; `/readyz` once the monitor reads the GPUs (before
that it says why not, e.g. "waiting for the NVIDIA driver: ..."). With secure metrics on, the
port is HTTPS and `/metrics` answers only a bearer token allowed to get it
(`vgpu.app.metrics_guard`); the probes stay open, they tell nothing about the node's pods.
"""

import threading
from collections.abc import Callable, Mapping

from vgpu.app.exposition import CONTENT_TYPE
from vgpu.app.metrics_guard import MetricsGuard
from vgpu.app.plain_http import Reply, Route, guarded, probe_route


class MonitorReadiness:
    """Empty once the monitor reads the GPUs, else why not (`/readyz`)."""

    def __init__(self) -> None:
        self._why = "starting"
        self._lock = threading.Lock()

    def waiting(self, why: str) -> None:
        with self._lock:
            self._why = why

    def ready(self) -> None:
        self.waiting("")

    def __call__(self) -> str:
        with self._lock:
            return self._why


def monitor_routes(
    render: Callable[[], bytes], readiness: Callable[[], str], guard: MetricsGuard | None
) -> dict[str, Route]:
    def metrics(headers: Mapping[str, str]) -> Reply:
        return Reply(200, render(), CONTENT_TYPE)

    return {
        "/metrics": metrics if guard is None else guarded(guard, metrics),
        "/healthz": probe_route(lambda: ""),
        "/readyz": probe_route(readiness),
    }
