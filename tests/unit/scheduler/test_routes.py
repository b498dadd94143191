"""The extender's bare router: exact routes, 404 and 405, a 500 for a handler that raises, and
its shutdown hook when the server stops."""

import logging

import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.testclient import TestClient

from vgpu.app.scheduler.routes import Routes


def app_with_routes(stopped: list[bool]) -> Routes:
    routes = Routes(on_shutdown=lambda: stopped.append(True))

    @routes.post("/echo")
    async def echo(request: Request) -> Response:
        return Response(await request.body(), media_type="application/json")

    @routes.get("/healthz")
    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    @routes.post("/broken")
    async def broken(request: Request) -> Response:
        raise RuntimeError("disk on fire")

    return routes


def test_a_route_gets_the_request_and_sends_its_response() -> None:
    with TestClient(app_with_routes([])) as client:
        answer = client.post("/echo", content=b'{"a": 1}')
        assert answer.status_code == 200 and answer.json() == {"a": 1}
        assert client.get("/healthz").text == "ok"
    assert app_with_routes([]).paths == {"/echo", "/healthz", "/broken"}


def test_an_unknown_path_is_404_and_a_wrong_method_405() -> None:
    with TestClient(app_with_routes([])) as client:
        assert client.get("/nowhere").status_code == 404
        assert client.post("/healthz").status_code == 405
        assert client.get("/echo").status_code == 405
        assert client.get("/echo/").status_code == 404  # exact paths only


def test_a_handler_that_raises_gets_a_500_and_a_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR), TestClient(app_with_routes([])) as client:
        answer = client.post("/broken", content=b"{}")
        assert answer.status_code == 500
        assert client.get("/healthz").status_code == 200  # and it serves on
    assert "POST /broken failed" in caplog.text and "disk on fire" in caplog.text


def test_shutdown_runs_when_the_server_stops() -> None:
    stopped: list[bool] = []
    with TestClient(app_with_routes(stopped)) as client:
        client.get("/healthz")
        assert stopped == []
    assert stopped == [True]
