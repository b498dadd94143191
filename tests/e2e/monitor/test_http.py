"""The monitor's HTTP port over a real socket: a failing render is a 500, not a dead server."""

import urllib.error
import urllib.request

import pytest

from vgpu.app.monitor.http import MetricsServer


def test_a_failing_render_answers_500_and_the_next_scrape_still_works() -> None:
    answers = iter([RuntimeError("region decoder bug"), b"# HELP x y\n"])

    def render() -> bytes:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    server = MetricsServer("127.0.0.1", 0, render)
    server.start()
    host, port = server.address
    try:
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10)
        assert failed.value.code == 500
        assert b"see the monitor's log" in failed.value.read()

        with urllib.request.urlopen(f"http://{host}:{port}/metrics?x=1", timeout=10) as ok:
            assert ok.read() == b"# HELP x y\n"
    finally:
        server.stop()
