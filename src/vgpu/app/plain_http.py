"""A small HTTP(S) server on a thread, for the per-node processes' few GET paths.

The device plugin (`/healthz`, `/readyz`) and the monitor (`/metrics` too) answer a handful of
GETs from the kubelet and Prometheus; the standard library's threading server does that without
an event loop beside their threads. Each path is a `Route`: it gets the request's headers and
returns a `Reply`. A route that raises answers 500 with a sentence, never a dead server. With a
TLS context, the handshake happens on the connection's own thread (a slow client never holds up
the accepting one), and a connection that stays silent is dropped after `IDLE_TIMEOUT` seconds.
At most `MAX_CONNECTIONS` are served at once, each on its own thread; one more is closed as
soon as it is accepted, so a flood of connections costs no more threads than that.
"""

import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from vgpu.app.metrics_guard import MetricsGuard

log = logging.getLogger(__name__)

TEXT = "text/plain; charset=utf-8"
IDLE_TIMEOUT = 10.0
MAX_CONNECTIONS = 64  # the kubelet's probes and a scraper or two need a handful
REFUSALS_SAID_EVERY = 60.0


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes
    content_type: str = TEXT
    headers: Mapping[str, str] = field(default_factory=dict)


Route = Callable[[Mapping[str, str]], Reply]  # the request's headers (lower-case names) -> reply


def text_reply(status: int, sentence: str) -> Reply:
    return Reply(status, f"{sentence}\n".encode())


class PlainHttpServer:
    """Serves `routes` (path -> Route) on `host:port` (port 0: any free port) from a daemon
    thread named `name`; HTTPS with `tls`. OSError from the constructor when the address is
    taken or invalid."""

    def __init__(
        self,
        host: str,
        port: int,
        routes: Mapping[str, Route],
        name: str,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        server_class = _IPv6Server if ":" in host else _Server
        self._server = server_class((host, port), _handler(dict(routes)))
        self._server.daemon_threads = True
        self._server.tls = tls
        self.tls = tls is not None
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{shown}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    tls: ssl.SSLContext | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._refused_said = -REFUSALS_SAID_EVERY  # monotonic time the last refusal was logged

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._say_refused(client_address[0])
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def _say_refused(self, client: str) -> None:
        now = time.monotonic()
        if now - self._refused_said >= REFUSALS_SAID_EVERY:  # once a minute during a flood
            self._refused_said = now
            log.warning(
                "closing new connections (one from %s) at once: %d are open already",
                client,
                MAX_CONNECTIONS,
            )

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def get_request(self) -> tuple[Any, Any]:
        conn, address = super().get_request()
        if self.tls is not None:  # the handshake happens later, on the connection's thread
            conn = self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        return conn, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that hangs up or fails the TLS handshake is its own problem, not ours
        log.debug("connection from %s ended with an error", client_address, exc_info=True)


class _IPv6Server(_Server):
    address_family = socket.AF_INET6


def _handler(routes: dict[str, Route]) -> type[BaseHTTPRequestHandler]:
    served = ", ".join(sorted(routes))

    class Handler(BaseHTTPRequestHandler):
        timeout = IDLE_TIMEOUT

        def setup(self) -> None:
            super().setup()
            if isinstance(self.connection, ssl.SSLSocket):
                self.connection.do_handshake()

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            route = routes.get(path)
            if route is None:
                self._send(text_reply(404, f"not found: this port serves {served}"))
                return
            headers = {name.lower(): value for name, value in self.headers.items()}
            try:
                reply = route(headers)
            except Exception:  # a bad answer must never take the server down
                log.exception("answering GET %s failed", path)
                reply = text_reply(500, f"answering {path} failed; see the log")
            self._send(reply)

        def _send(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s %s", self.address_string(), format % args)

    return Handler


def probe_route(check: Callable[[], str]) -> Route:
    """A health probe: 200 `ok` when `check()` is empty, else 503 with what it says."""

    def route(headers: Mapping[str, str]) -> Reply:
        why = check()
        return text_reply(503, why) if why else text_reply(200, "ok")

    return route


def guarded(guard: MetricsGuard, route: Route) -> Route:
    """`route` for the requests `guard` lets through; the guard's refusal for the rest."""

    def checked(headers: Mapping[str, str]) -> Reply:
        refusal = guard.check(headers.get("authorization"))
        if refusal is not None:
            return Reply(refusal.status, f"{refusal.message}\n".encode(), TEXT, refusal.headers)
        return route(headers)

    return checked
