import logging

import pytest

from tests.unit.device_plugin.fakes import OPTIONS, NullHandler
from vgpu.adapters.fake.kubelet import FakeKubelet
from vgpu.app.device_plugin.session import KubeletSession


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _session(kubelet: FakeKubelet, clock: Clock) -> KubeletSession:
    return KubeletSession(kubelet, NullHandler(), "nvidia.com/gpu", OPTIONS, 5.0, clock)


def test_start_serves_before_it_registers() -> None:
    kubelet = FakeKubelet()
    session = _session(kubelet, Clock())

    session.start()

    assert kubelet.calls == ["serve", "register"]
    assert kubelet.registered == [("nvidia.com/gpu", OPTIONS)]
    assert session.registered


def test_a_failed_registration_is_retried_after_the_delay_without_serving_again() -> None:
    kubelet, clock = FakeKubelet(), Clock()
    kubelet.refusals = 1
    session = _session(kubelet, clock)
    session.start()
    assert not session.registered

    clock.now += 4.9
    session.tick()
    assert kubelet.calls == ["serve", "register"]

    clock.now += 0.2
    session.tick()
    assert kubelet.calls == ["serve", "register", "register"]
    assert session.registered


def test_a_repeated_failure_is_logged_once_until_a_registration_succeeds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kubelet, clock = FakeKubelet(), Clock()
    kubelet.refusals = 3
    session = _session(kubelet, clock)
    with caplog.at_level(logging.DEBUG, logger="vgpu.app.device_plugin.session"):
        session.start()
        for _ in range(3):
            clock.now += 5.1
            session.tick()
        assert session.registered
        kubelet.refusals = 1
        kubelet.restart()
        session.tick()

    assert kubelet.calls.count("register") == 5
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    refused = f"{kubelet.socket_path.rsplit('/', 1)[0]}/kubelet.sock refused to register"
    assert errors == [f"kubelet at {refused}; retrying every 5 s"] * 2  # first, after success
    repeats = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert [r.getMessage() for r in repeats] == errors[:1] * 2


def test_a_kubelet_restart_leads_to_serving_and_registering_again() -> None:
    kubelet, clock = FakeKubelet(), Clock()
    session = _session(kubelet, clock)
    session.start()
    session.tick()
    assert kubelet.calls == ["serve", "register"]

    kubelet.restart()
    session.tick()

    assert kubelet.calls == ["serve", "register", "serve", "register"]
    assert session.registrations == 2


def test_a_restart_while_waiting_to_retry_serves_again_before_registering() -> None:
    kubelet, clock = FakeKubelet(), Clock()
    kubelet.refusals = 1
    session = _session(kubelet, clock)
    session.start()

    kubelet.restart()
    clock.now += 5.1
    session.tick()

    assert kubelet.calls == ["serve", "register", "serve", "register"]
    assert session.registered


def test_stop_stops_the_kubelet_side() -> None:
    kubelet = FakeKubelet()
    session = _session(kubelet, Clock())
    session.start()
    session.stop()
    assert kubelet.calls[-1] == "stop" and not session.registered
