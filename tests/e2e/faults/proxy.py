"""A fault-injecting HTTP proxy between a vgpu process and the API emulator.

The process's kubeconfig points at the proxy (`FaultProxy.kubeconfig`); every request goes on
to the emulator unless a `Rule` matches it. A rule names a method (or any), a regular
expression searched in the request target (path and query), and what to do:

    PASS        forward untouched (a rule that shields some requests from later rules)
    DELAY       wait `seconds`, then forward
    HANG        do not forward until `release()` (or the client hangs up)
    CUT_BEFORE  close the client's connection without forwarding: the call never happened
    CUT_AFTER   forward, let the API answer, close the client's connection without the answer:
                the call committed but its caller cannot know (not for watches: their answer
                only ends when the watch does)
    RESPOND     answer `status` with a Kubernetes Status body, without forwarding

`times` bounds how many requests a rule takes (None: all), `probability` lets it take only
some (drawn from the proxy's seeded RNG, so a seed replays the same decisions for the same
sequence of requests). Rules are tried in the order added; the first one that matches and
whose draw succeeds applies. Rules can be added, removed and cleared at any time from the
test's thread. Streaming responses (watches) are relayed as they arrive.

Each request gets its own upstream connection and the client's connection is closed after
the answer, so one rule never affects another request.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


class Action(enum.Enum):
    PASS = "pass"
    DELAY = "delay"
    HANG = "hang"
    CUT_BEFORE = "cut-before"
    CUT_AFTER = "cut-after"
    RESPOND = "respond"


@dataclass(eq=False)
class Rule:
    """What to do with the requests it matches; `hits` counts those it took."""

    action: Action
    method: str | None = None  # None: any method
    path: str = ""  # regular expression searched in "path?query"
    times: int | None = None
    probability: float = 1.0
    seconds: float = 0.0  # DELAY
    status: int = 500  # RESPOND
    hits: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability must be within 0..1, got {self.probability}")
        if self.times is not None and self.times < 0:
            raise ValueError(f"times must be >= 0 or None, got {self.times}")
        self._pattern = re.compile(self.path)

    def matches(self, method: str, target: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.method is not None and self.method.upper() != method.upper():
            return False
        return self._pattern.search(target) is not None

    def __str__(self) -> str:
        extra = {Action.DELAY: f" {self.seconds}s", Action.RESPOND: f" {self.status}"}
        return f"{self.action.value}{extra.get(self.action, '')} {self.method or '*'} {self.path}"


@dataclass(frozen=True)
class Seen:
    """One request the proxy handled and what it did with it."""

    method: str
    target: str
    action: Action
    at: float = field(default_factory=time.monotonic)


class FaultProxy:
    """Serves on 127.0.0.1 (a free port) in a background thread; `url` is its address."""

    def __init__(self, upstream: str, seed: int = 0) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream must be http://HOST:PORT, got {upstream!r}")
        self._upstream = (parts.hostname, parts.port)
        self._rng = random.Random(seed)
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self._seen: list[Seen] = []
        self._finished: list[Seen] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._released: asyncio.Event | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fault-proxy", daemon=True)
        self.url = ""
        self.abandoned = 0  # held requests whose client hung up first (never forwarded)

    # control, from the test's thread ------------------------------------------------------
    def start(self) -> FaultProxy:
        self._thread.start()
        if not self._ready.wait(10) or not self.url:
            raise RuntimeError("the fault proxy did not start")
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._thread.join(10)
        self._loop = None

    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove(self, rule: Rule) -> None:
        with self._lock:
            if rule in self._rules:
                self._rules.remove(rule)

    def clear(self) -> None:
        """Remove every rule and let every hung request go on: the network is healthy again."""
        with self._lock:
            self._rules.clear()
        self.release()

    def release(self) -> None:
        """Forward every request held by a HANG rule now; later ones hang again."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._release_now)

    @property
    def seen(self) -> list[Seen]:
        with self._lock:
            return list(self._seen)

    def took(self, action: Action, path: str = "") -> int:
        """How many requests whose target matches `path` got `action`."""
        return _count(self.seen, action, path)

    def finished(self, action: Action, path: str = "") -> int:
        """Like `took`, counting only requests the proxy is done with (answered or cut)."""
        with self._lock:
            return _count(self._finished, action, path)

    def faults(self) -> int:
        """How many requests a rule other than PASS has taken."""
        return sum(1 for s in self.seen if s.action is not Action.PASS)

    def kubeconfig(self, path: Path) -> Path:
        """Write a kubeconfig (JSON is valid YAML) whose current context goes through here."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "proxied", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "test-token"}}],
            "contexts": [{"name": "proxied", "context": {"cluster": "proxied", "user": "tester"}}],
            "current-context": "proxied",
        }
        path.write_text(json.dumps(config))
        return path

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # the server, on its own loop ----------------------------------------------------------
    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._open())
            loop.run_forever()
        finally:
            loop.close()

    async def _open(self) -> None:
        self._released = asyncio.Event()
        try:
            self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
            port = self._server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}"
        finally:
            self._ready.set()

    async def _shutdown(self) -> None:
        self._release_now()
        if self._server is not None:
            self._server.close()
        for writer in list(self._connections):
            writer.close()
        current = asyncio.current_task()
        for task in asyncio.all_tasks():
            if task is not current:
                task.cancel()
        assert self._loop is not None
        self._loop.call_soon(self._loop.stop)

    def _release_now(self) -> None:
        if self._released is not None:
            self._released.set()
            self._released = asyncio.Event()

    def _decide(self, method: str, target: str) -> Rule:
        """The first rule that takes the request, or `_FORWARD`."""
        with self._lock:
            for rule in self._rules:
                if not rule.matches(method, target):
                    continue
                if rule.probability < 1.0 and self._rng.random() >= rule.probability:
                    continue
                rule.hits += 1
                self._seen.append(Seen(method, target, rule.action))
                return rule
            self._seen.append(Seen(method, target, Action.PASS))
            return _FORWARD

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            request = await _read_request(reader)
            if request is not None:
                await self._handle(request, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._connections.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _handle(
        self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        rule = self._decide(request.method, request.target)
        try:
            await self._apply(rule, request, reader, writer)
        finally:
            with self._lock:
                self._finished.append(Seen(request.method, request.target, rule.action))

    async def _apply(
        self,
        rule: Rule,
        request: _Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        action = rule.action
        if action is Action.CUT_BEFORE:
            return
        if action is Action.RESPOND:
            writer.write(_status_response(rule.status, str(rule)))
            await writer.drain()
            return
        if action is Action.DELAY:
            await asyncio.sleep(rule.seconds)
        if action is Action.HANG and not await self._hold(reader):
            return  # the client gave up while held: nothing was forwarded
        upstream_reader, upstream_writer = await asyncio.open_connection(*self._upstream)
        self._connections.add(upstream_writer)
        try:
            upstream_writer.write(request.raw)
            await upstream_writer.drain()
            if action is Action.CUT_AFTER:
                while await upstream_reader.read(65536):
                    pass  # the API's whole answer, so that the call has committed
                return
            while chunk := await upstream_reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        finally:
            self._connections.discard(upstream_writer)
            upstream_writer.close()

    async def _hold(self, reader: asyncio.StreamReader) -> bool:
        """Wait for `release()`; False when the client closed its connection first."""
        assert self._released is not None
        released = asyncio.ensure_future(self._released.wait())
        hung_up = asyncio.ensure_future(reader.read(1))
        done, pending = await asyncio.wait({released, hung_up}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if hung_up in done:
            self.abandoned += 1
            return False
        return True


_FORWARD = Rule(Action.PASS)  # what happens to a request no rule takes


def _count(seen: list[Seen], action: Action, path: str) -> int:
    pattern = re.compile(path)
    return sum(1 for s in seen if s.action is action and pattern.search(s.target))


@dataclass(frozen=True)
class _Request:
    method: str
    target: str
    raw: bytes  # as forwarded: the client's bytes with `Connection: close`


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ", 2)
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
    names = {name.lower(): value for name, value in headers}
    if names.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        body = await reader.readexactly(int(names.get("content-length", "0") or "0"))
    kept = [(n, v) for n, v in headers if n.lower() not in ("connection", "keep-alive")]
    out = [f"{method} {target} {version}", *(f"{n}: {v}" for n, v in kept), "Connection: close"]
    raw = ("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + body
    return _Request(method.upper(), target, raw)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    """A chunked body, kept chunked (it is forwarded with its Transfer-Encoding header)."""
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        parts.append(size_line)
        size = int(size_line.split(b";")[0].strip(), 16)
        if size == 0:
            while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
                parts.append(line)
            parts.append(b"\r\n")
            return b"".join(parts)
        parts.append(await reader.readexactly(size + 2))


def _status_response(status: int, why: str) -> bytes:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"injected by the fault proxy: {why}",
        "reason": "InternalError" if status >= 500 else "Conflict" if status == 409 else "",
        "code": status,
    }
    payload = json.dumps(body).encode()
    head = (
        f"HTTP/1.1 {status} Injected\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + payload
