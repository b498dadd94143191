"""The smallest ASGI app that serves a few fixed paths: the extender's verbs.

kube-scheduler calls `/filter` and `/bind` once per pod, one pod at a time, so every request's
overhead is on the scheduling path. FastAPI's stack (its middlewares, routing, dependency
solving) cost about twice the CPU of the HTTP exchange itself on each request; this app does
only what the verbs need: an exact path and method picks an async handler, which gets
Starlette's `Request` and returns Starlette's `Response`. A path it does not serve gets 404, a
method it does not serve on a served path 405, and a handler that raises gets a 500 with the
error logged, never a dropped connection. `on_shutdown` runs when the server stops (ASGI
lifespan).
"""

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Response]]
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class Routes:
    """An ASGI app of exact routes: `@routes.post("/filter")` registers a handler."""

    def __init__(self, on_shutdown: Callable[[], None] = lambda: None) -> None:
        self._handlers: dict[tuple[str, str], Handler] = {}
        self._paths: set[str] = set()
        self._on_shutdown = on_shutdown

    @property
    def paths(self) -> frozenset[str]:
        """Every path served, by any method."""
        return frozenset(self._paths)

    def get(self, path: str) -> Callable[[Handler], Handler]:
        return self._route("GET", path)

    def post(self, path: str) -> Callable[[Handler], Handler]:
        return self._route("POST", path)

    def _route(self, method: str, path: str) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self._handlers[method, path] = handler
            self._paths.add(path)
            return handler

        return register

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":  # no websockets here: uvicorn closes them
            return
        handler = self._handlers.get((scope["method"], scope["path"]))
        if handler is None:
            found = scope["path"] in self._paths
            response: Response = PlainTextResponse(
                "Method Not Allowed" if found else "Not Found", 405 if found else 404
            )
        else:
            try:
                response = await handler(Request(scope, receive))
            except Exception:
                log.exception("%s %s failed", scope["method"], scope["path"])
                response = PlainTextResponse("Internal Server Error", 500)
        await response(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self._on_shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return
