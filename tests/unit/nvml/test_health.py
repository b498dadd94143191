"""Health from NVML events: registration, XID rules, NVML failures, and the env overrides."""

import logging

import pytest

from tests.unit.nvml.driver import A100_UUID, V100_UUID, Driver, gpus, pynvml
from vgpu.adapters.nvml import xid_filter_from_env
from vgpu.domain.inventory import HealthEvent

ALL_KINDS = (
    pynvml.nvmlEventTypeXidCriticalError
    | pynvml.nvmlEventTypeSingleBitEccError
    | pynvml.nvmlEventTypeDoubleBitEccError
)


def unhealthy(*events: HealthEvent) -> list[str]:
    return [e.uuid for e in events if not e.healthy]


# registration -----------------------------------------------------------------------------
def test_every_gpu_is_registered_for_xid_and_ecc_events_it_supports(driver: Driver) -> None:
    driver.cards[1].supported_events = pynvml.nvmlEventTypeXidCriticalError

    assert gpus().wait_for_health_events(0) == []

    register = driver.mocks["nvmlDeviceRegisterEvents"]
    assert [(c.args[0], c.args[1]) for c in register.call_args_list] == [
        (driver.cards[0], ALL_KINDS),
        (driver.cards[1], pynvml.nvmlEventTypeXidCriticalError),
    ]
    assert all(c.args[2] == "event-set" for c in register.call_args_list)


def test_the_wait_timeout_is_passed_in_milliseconds(driver: Driver) -> None:
    gpus().wait_for_health_events(2.5)

    driver.mocks["nvmlEventSetWait"].assert_called_once_with("event-set", 2500)


def test_a_gpu_too_old_for_events_is_unhealthy_as_in_nvidias_plugin(driver: Driver) -> None:
    driver.cards[0].register_error = pynvml.NVMLError_NotSupported()

    events = gpus().wait_for_health_events(0)

    assert events == [
        HealthEvent(V100_UUID, False, "too old for NVML health events (registration not supported)")
    ]
    driver.mocks["nvmlEventSetWait"].assert_not_called()


def test_a_refused_registration_makes_only_that_gpu_unhealthy(driver: Driver) -> None:
    driver.cards[1].register_error = pynvml.NVMLError_Unknown()
    adapter = gpus()

    first = adapter.wait_for_health_events(0)
    second = adapter.wait_for_health_events(0)

    assert unhealthy(*first) == [A100_UUID]
    assert "refused to register" in first[0].reason
    assert second == []


def test_unreadable_supported_events_make_that_gpu_unhealthy(driver: Driver) -> None:
    driver.cards[0].supported_events = pynvml.NVMLError_GpuIsLost()

    assert unhealthy(*gpus().wait_for_health_events(0)) == [V100_UUID]


def test_no_event_set_means_health_checks_off_not_a_crash(
    driver: Driver, caplog: pytest.LogCaptureFixture
) -> None:
    driver.mocks["nvmlEventSetCreate"].side_effect = pynvml.NVMLError_NotSupported()
    adapter = gpus()

    with caplog.at_level(logging.ERROR):
        assert adapter.wait_for_health_events(0) == []
        assert adapter.wait_for_health_events(0) == []

    assert "GPU health checks are off" in caplog.text
    driver.mocks["nvmlDeviceRegisterEvents"].assert_not_called()
    driver.mocks["nvmlEventSetWait"].assert_not_called()


def test_the_first_health_wait_discovers_the_gpus_itself(driver: Driver) -> None:
    gpus().wait_for_health_events(0)

    assert driver.mocks["nvmlDeviceRegisterEvents"].call_count == 2


# events -----------------------------------------------------------------------------------
def test_a_timeout_means_no_change(driver: Driver) -> None:
    assert gpus().wait_for_health_events(0) == []


def test_a_critical_xid_marks_its_gpu_unhealthy(driver: Driver) -> None:
    driver.events(driver.event(driver.cards[1], 79))

    events = gpus().wait_for_health_events(0)

    assert events == [HealthEvent(A100_UUID, False, "XID 79 critical error")]


@pytest.mark.parametrize("xid", [13, 31, 43, 45, 68, 109])
def test_application_xids_leave_the_gpu_healthy(driver: Driver, xid: int) -> None:
    driver.events(driver.event(driver.cards[0], xid))

    assert gpus().wait_for_health_events(0) == []


def test_an_unhealthy_gpu_is_reported_once(driver: Driver) -> None:
    driver.events(driver.event(driver.cards[0], 79), driver.event(driver.cards[0], 48))
    adapter = gpus()

    assert unhealthy(*adapter.wait_for_health_events(0)) == [V100_UUID]
    assert adapter.wait_for_health_events(0) == []


def test_ecc_events_are_skipped(driver: Driver) -> None:
    driver.events(driver.event(driver.cards[0], 0, kind=pynvml.nvmlEventTypeDoubleBitEccError))

    assert gpus().wait_for_health_events(0) == []


def test_an_event_on_a_gpu_this_node_does_not_know_is_ignored(driver: Driver) -> None:
    stranger = type(driver.cards[0])("GPU-ffffffff-0000-0000-0000-000000000000", "T4", 1)
    driver.events(driver.event(stranger, 79))

    assert gpus().wait_for_health_events(0) == []


def test_an_event_on_an_unnameable_gpu_marks_every_gpu_unhealthy(driver: Driver) -> None:
    lost = type(driver.cards[0])(pynvml.NVMLError_GpuIsLost(), "?", 1)
    driver.events(driver.event(lost, 79))

    events = gpus().wait_for_health_events(0)

    assert unhealthy(*events) == [V100_UUID, A100_UUID]
    assert events[0].reason == "XID 79 on an unidentified GPU"


def test_three_failed_waits_in_a_row_mark_every_gpu_unhealthy(driver: Driver) -> None:
    failure = pynvml.NVMLError_Unknown()
    driver.events(failure, failure, failure)
    adapter = gpus()

    assert adapter.wait_for_health_events(0) == []
    assert adapter.wait_for_health_events(0) == []
    assert unhealthy(*adapter.wait_for_health_events(0)) == [V100_UUID, A100_UUID]


def test_failed_waits_broken_by_a_timeout_do_not_count_together(driver: Driver) -> None:
    failure = pynvml.NVMLError_Unknown()
    driver.events(failure, failure, pynvml.NVMLError_Timeout(), failure, failure)
    adapter = gpus()

    assert [adapter.wait_for_health_events(0) for _ in range(5)] == [[]] * 5


# environment overrides --------------------------------------------------------------------
@pytest.mark.parametrize("value", ["all", "xids", "ALL", "48,xids"])
def test_disabling_all_health_checks_watches_nothing(driver: Driver, value: str) -> None:
    adapter = gpus(xids=xid_filter_from_env({"DP_DISABLE_HEALTHCHECKS": value}))

    assert adapter.wait_for_health_events(0) == []
    driver.mocks["nvmlEventSetCreate"].assert_not_called()


def test_extra_ignored_xids_come_from_the_disable_list(driver: Driver) -> None:
    driver.events(driver.event(driver.cards[0], 79), driver.event(driver.cards[1], 48))
    adapter = gpus(xids=xid_filter_from_env({"DP_DISABLE_HEALTHCHECKS": " 79, 94"}))

    assert adapter.wait_for_health_events(0) == []
    assert unhealthy(*adapter.wait_for_health_events(0)) == [A100_UUID]


def test_an_enabled_xid_counts_even_if_nvidia_ignores_it_by_default(driver: Driver) -> None:
    driver.events(driver.event(driver.cards[0], 31))
    adapter = gpus(xids=xid_filter_from_env({"DP_ENABLE_HEALTHCHECKS": "31"}))

    assert unhealthy(*adapter.wait_for_health_events(0)) == [V100_UUID]


def test_with_all_disabled_only_enabled_xids_count(driver: Driver) -> None:
    driver.events(driver.event(driver.cards[0], 79), driver.event(driver.cards[1], 48))
    env = {"DP_DISABLE_HEALTHCHECKS": "all", "DP_ENABLE_HEALTHCHECKS": "48"}
    adapter = gpus(xids=xid_filter_from_env(env))

    assert adapter.wait_for_health_events(0) == []
    assert unhealthy(*adapter.wait_for_health_events(0)) == [A100_UUID]


def test_a_malformed_xid_is_logged_and_the_rest_still_apply(
    driver: Driver, caplog: pytest.LogCaptureFixture
) -> None:
    driver.events(driver.event(driver.cards[0], 79))

    with caplog.at_level(logging.WARNING):
        xids = xid_filter_from_env({"DP_DISABLE_HEALTHCHECKS": "seventy,79"})

    assert gpus(xids=xids).wait_for_health_events(0) == []
    assert "ignoring 'seventy'" in caplog.text


# close ------------------------------------------------------------------------------------
def test_close_frees_the_event_set_then_shuts_down(driver: Driver) -> None:
    adapter = gpus()
    adapter.wait_for_health_events(0)

    adapter.close()

    driver.mocks["nvmlEventSetFree"].assert_called_once_with("event-set")
    driver.mocks["nvmlShutdown"].assert_called_once_with()
    assert adapter.wait_for_health_events(5) == []
    assert driver.mocks["nvmlEventSetWait"].call_count == 1
