"""The monitor's HTTP port over a real socket: a failing render is a 500, not a dead server;
`/readyz` says why the monitor is not ready yet."""

import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from vgpu.app.monitor.http import MonitorReadiness, monitor_routes
from vgpu.app.plain_http import MAX_CONNECTIONS, PlainHttpServer


def test_a_failing_render_answers_500_and_the_next_scrape_still_works() -> None:
    answers = iter([RuntimeError("region decoder bug"), b"# HELP x y\n"])

    def render() -> bytes:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    server = PlainHttpServer("127.0.0.1", 0, monitor_routes(render, lambda: "", None), "t")
    server.start()
    try:
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(f"{server.url}/metrics", timeout=10)
        assert failed.value.code == 500
        assert b"answering /metrics failed; see the log" in failed.value.read()

        with urllib.request.urlopen(f"{server.url}/metrics?x=1", timeout=10) as ok:
            assert ok.read() == b"# HELP x y\n"
    finally:
        server.stop()


def test_readyz_says_why_until_the_monitor_reads_the_gpus_and_healthz_is_ok_all_along() -> None:
    readiness = MonitorReadiness()
    routes = monitor_routes(lambda: b"", readiness, None)
    server = PlainHttpServer("127.0.0.1", 0, routes, "t")
    server.start()
    try:
        readiness.waiting("waiting for the NVIDIA driver: the NVIDIA kernel driver is not loaded")
        with pytest.raises(urllib.error.HTTPError) as waiting:
            urllib.request.urlopen(f"{server.url}/readyz", timeout=10)
        assert waiting.value.code == 503
        assert waiting.value.read() == (
            b"waiting for the NVIDIA driver: the NVIDIA kernel driver is not loaded\n"
        )
        with urllib.request.urlopen(f"{server.url}/healthz", timeout=10) as live:
            assert live.read() == b"ok\n"

        readiness.ready()
        with urllib.request.urlopen(f"{server.url}/readyz", timeout=10) as ready:
            assert ready.read() == b"ok\n"
    finally:
        server.stop()


def test_a_flood_of_silent_connections_is_capped_and_the_port_answers_once_they_go() -> None:
    server = PlainHttpServer("127.0.0.1", 0, monitor_routes(lambda: b"", lambda: "", None), "t")
    server.start()
    host, port = server.address
    flood = [socket.create_connection((host, port), timeout=10) for _ in range(MAX_CONNECTIONS)]
    try:
        time.sleep(0.2)  # every one of them accepted and holding its thread
        threads = threading.active_count()
        extra = socket.create_connection((host, port), timeout=10)
        assert extra.recv(1) == b""  # closed at once, not served and not queued
        extra.close()
        assert threading.active_count() <= threads
    finally:
        for connection in flood:
            connection.close()
    try:
        deadline = time.monotonic() + 10
        while True:  # their threads see the close and give their slots back
            try:
                with urllib.request.urlopen(f"{server.url}/healthz", timeout=10) as live:
                    assert live.read() == b"ok\n"
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, "the port never answered again"
                time.sleep(0.05)
    finally:
        server.stop()
