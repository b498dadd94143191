"""Waiting for the NVIDIA driver at start, against a patched NVML that answers only later."""

import logging
import threading

import pytest
from pytest_mock import MockerFixture

from tests.unit.nvml.driver import V100_UUID, install, pynvml
from vgpu.adapters.nvml import NvmlGpus
from vgpu.app.driver_wait import DriverWait
from vgpu.ports.gpu import GpuUnavailable


class Time:
    """A clock and a stop event whose waits pass at once, moving the clock on."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.pauses: list[float] = []

    def __call__(self) -> float:
        return self.now


class Stop(threading.Event):
    def __init__(self, time: Time, stop_after: int | None = None) -> None:
        super().__init__()
        self._time = time
        self._stop_after = stop_after

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self._time.pauses.append(timeout)
        self._time.now += timeout
        if self._stop_after is not None and len(self._time.pauses) >= self._stop_after:
            self.set()
        return self.is_set()


NOT_FOUND = pynvml.NVMLError_LibraryNotFound
NOT_LOADED = pynvml.NVMLError_DriverNotLoaded


def test_the_gpus_are_found_once_the_driver_appears_and_readiness_says_why_until_then(
    mocker: MockerFixture, caplog: pytest.LogCaptureFixture
) -> None:
    driver = install(mocker)
    driver.mocks["nvmlInit"].side_effect = [NOT_FOUND(), NOT_FOUND(), NOT_LOADED(), None]
    time, told = Time(), []
    wait = DriverWait(NvmlGpus().discover, 300, 30, told.append, time)

    with caplog.at_level(logging.INFO, "vgpu.app.driver_wait"):
        gpus = wait.wait(Stop(time))

    assert gpus is not None and gpus[0].uuid == V100_UUID
    assert time.pauses == [1, 2, 4]  # twice as long each time
    assert [why.split(":")[0] for why in told] == ["waiting for the NVIDIA driver"] * 3
    assert "libnvidia-ml.so.1 was not found" in told[0]
    assert "kernel driver is not loaded" in told[2]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2  # one line per reason, not one per try
    assert warnings[0].startswith("waiting for the NVIDIA driver (up to 300 s, driver_wait): the ")
    assert caplog.records[-1].getMessage() == "the NVIDIA driver answered after 7 s"


def test_a_long_wait_is_logged_once_a_minute_with_pauses_of_at_most_retry_max(
    mocker: MockerFixture, caplog: pytest.LogCaptureFixture
) -> None:
    driver = install(mocker)
    driver.mocks["nvmlInit"].side_effect = [NOT_LOADED()] * 12 + [None]
    time = Time()

    with caplog.at_level(logging.WARNING, "vgpu.app.driver_wait"):
        gpus = DriverWait(NvmlGpus().discover, 3600, 20, clock=time).wait(Stop(time))

    assert gpus is not None
    assert time.pauses == [1, 2, 4, 8, 16, 20, 20, 20, 20, 20, 20, 20]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    assert lines[1].startswith("still waiting for the NVIDIA driver after 71 s: the NVIDIA kernel")
    assert lines[2].startswith("still waiting for the NVIDIA driver after 131 s")


def test_after_driver_wait_seconds_the_last_reason_is_raised(
    mocker: MockerFixture, caplog: pytest.LogCaptureFixture
) -> None:
    driver = install(mocker)
    driver.mocks["nvmlInit"].side_effect = NOT_LOADED()
    time = Time()

    with pytest.raises(GpuUnavailable, match="kernel driver is not loaded"):
        DriverWait(NvmlGpus().discover, 10, 30, clock=time).wait(Stop(time))

    assert time.pauses == [1, 2, 4, 3]  # the last pause ends at the deadline
    assert "gave up waiting for the NVIDIA driver after 10 s (driver_wait)" in caplog.text


def test_a_driver_wait_of_0_fails_at_once_as_before(mocker: MockerFixture) -> None:
    driver = install(mocker)
    driver.mocks["nvmlInit"].side_effect = NOT_FOUND()
    time = Time()

    with pytest.raises(GpuUnavailable, match=r"libnvidia-ml\.so\.1 was not found"):
        DriverWait(NvmlGpus().discover, 0, 30, clock=time).wait(Stop(time))

    assert time.pauses == []


def test_a_stop_during_the_wait_ends_it_without_an_error(mocker: MockerFixture) -> None:
    driver = install(mocker)
    driver.mocks["nvmlInit"].side_effect = NOT_LOADED()
    time = Time()

    assert DriverWait(NvmlGpus().discover, 300, 30, clock=time).wait(Stop(time, 2)) is None
    assert time.pauses == [1, 2]
