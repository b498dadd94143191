"""The monitor's HTTP port: `GET /metrics` (Prometheus text) and `GET /healthz`; nothing else."""

import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from vgpu.app.exposition import CONTENT_TYPE

log = logging.getLogger(__name__)


class MetricsServer:
    """Serves `render()` on `host:port` from a background thread (port 0: any free port)."""

    def __init__(self, host: str, port: int, render: Callable[[], bytes]) -> None:
        server_class = _IPv6Server if ":" in host else ThreadingHTTPServer
        self._server = server_class((host, port), _handler(render))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-http", daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def _handler(render: Callable[[], bytes]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                try:
                    self._reply(200, render(), CONTENT_TYPE)
                except Exception:  # a scrape must never take the server down
                    log.exception("rendering /metrics failed")
                    self._reply(500, b"rendering the metrics failed; see the monitor's log\n")
            elif path == "/healthz":
                self._reply(200, b"ok\n")
            else:
                self._reply(404, b"not found: this port serves /metrics and /healthz\n")

        def _reply(self, status: int, body: bytes, kind: str = "text/plain") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s %s", self.address_string(), format % args)

    return Handler
