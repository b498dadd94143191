"""Serve several ASGI apps, each on its own address, from one process and one event loop.

All sockets are bound before anything starts, so a taken port is a clean error naming the
listener. Then `on_start` runs once, every listener is served by its own uvicorn server in one
event loop, SIGTERM or SIGINT asks all of them to stop together (a second SIGINT forces it),
and `on_stop` runs once after the last one has stopped. SIGHUP calls `on_reload` (the webhook
reads its certificate files again).
"""

import asyncio
import contextlib
import logging
import signal
import socket
import ssl
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import uvicorn

log = logging.getLogger(__name__)

GRACE = 5  # seconds open connections get to finish after a stop is asked for


class ListenError(RuntimeError):
    """A listener that cannot take its address; the message names the listener."""


@dataclass(frozen=True, slots=True)
class Listener:
    """One app on one address; `tls` (a server context) makes it HTTPS."""

    name: str
    app: Any  # an ASGI application
    address: str
    port: int
    tls: ssl.SSLContext | None = None

    @property
    def url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"


def serve(
    listeners: Sequence[Listener],
    on_start: Callable[[], None],
    on_stop: Callable[[], None],
    on_reload: Callable[[], None] | None = None,
) -> None:
    """Serve every listener until SIGTERM/SIGINT; ListenError if one cannot bind."""
    sockets = _bind_all(listeners)
    servers = [_Server(_Config(listener)) for listener in listeners]
    try:
        on_start()
        try:
            for listener in listeners:
                log.info("serving the %s listener on %s", listener.name, listener.url)
            with asyncio.Runner(loop_factory=_loop_factory()) as runner:
                runner.run(_serve_all(servers, sockets, on_reload))
        finally:
            on_stop()
    finally:
        for sock in sockets:
            sock.close()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (Linux, macOS): it cuts the time every request
    spends in the loop; else asyncio's own."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _bind_all(listeners: Sequence[Listener]) -> list[socket.socket]:
    sockets: list[socket.socket] = []
    try:
        for listener in listeners:
            sockets.append(_bind(listener))
    except ListenError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _bind(listener: Listener) -> socket.socket:
    family = socket.AF_INET6 if ":" in listener.address else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP,
    # and without it every small reply waits out the peer's delayed ACK (about 40 ms)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((listener.address, listener.port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ListenError(
            f"cannot serve the {listener.name} listener on {listener.address}:{listener.port}: "
            f"{exc.strerror or exc}"
        ) from None
    return sock


async def _serve_all(
    servers: Sequence["_Server"],
    sockets: Sequence[socket.socket],
    on_reload: Callable[[], None] | None,
) -> None:
    loop = asyncio.get_running_loop()

    def stop_all() -> None:
        for server in servers:
            server.force_exit = server.should_exit  # asked twice: stop waiting for connections
            server.should_exit = True

    def reload() -> None:
        try:
            if on_reload is not None:
                on_reload()
        except Exception:  # a bad reload must not take the listeners down
            log.exception("reload failed; serving on as before")

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop_all)
    loop.add_signal_handler(signal.SIGHUP, reload)
    try:
        await asyncio.gather(
            *(s.serve(sockets=[sock]) for s, sock in zip(servers, sockets, strict=True))
        )
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(signum)


class _Config(uvicorn.Config):
    """uvicorn's settings for one listener, with the TLS context built by us rather than from
    file names (so that it can be reloaded in place)."""

    def __init__(self, listener: Listener) -> None:
        super().__init__(
            listener.app,
            host=listener.address,
            port=listener.port,
            log_config=None,
            access_log=False,
            proxy_headers=False,  # no proxy in front: the peer's address is the client's
            timeout_graceful_shutdown=GRACE,
        )
        self._tls = listener.tls

    def load(self) -> None:
        super().load()
        self.ssl = self._tls


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals alone: `_serve_all` handles them once for all."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
