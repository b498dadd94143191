"""Leader election decisions: who may take a Lease, and what is written."""

import threading
from datetime import UTC, datetime

import pytest

from vgpu.adapters.kubernetes.leader import (
    Attempt,
    LeaderElector,
    LeaseRecord,
    lease_call_timeout,
    may_take,
    micro_time,
    next_spec,
    released_spec,
)

NOW = datetime(2026, 8, 21, 6, 20, 39, 123456, tzinfo=UTC)


def _record(holder: str, transitions: int = 3) -> LeaseRecord:
    return LeaseRecord(
        holder, 15, "2026-08-21T06:00:00.000000Z", "2026-08-21T06:20:30.000000Z", transitions
    )


def test_a_lease_is_free_when_unheld_ours_or_unchanged_for_its_duration() -> None:
    assert may_take(_record(""), "me", 0)
    assert may_take(_record("me"), "me", 0)
    assert not may_take(_record("other"), "me", 14.9)
    assert may_take(_record("other"), "me", 15)


def test_renewing_keeps_the_acquire_time_and_taking_over_counts_a_transition() -> None:
    renewed = next_spec(_record("me"), "me", 15, NOW)
    assert renewed["acquireTime"] == "2026-08-21T06:00:00.000000Z"
    assert renewed["renewTime"] == "2026-08-21T06:20:39.123456Z"
    assert renewed["leaseTransitions"] == 3
    taken = next_spec(_record("other"), "me", 15, NOW)
    assert taken["holderIdentity"] == "me"
    assert taken["acquireTime"] == taken["renewTime"] == "2026-08-21T06:20:39.123456Z"
    assert taken["leaseTransitions"] == 4
    assert next_spec(None, "me", 15, NOW)["leaseTransitions"] == 0


def test_a_released_lease_has_no_holder_and_keeps_the_transitions() -> None:
    spec = released_spec(_record("me"), NOW)
    assert spec["holderIdentity"] is None and spec["leaseTransitions"] == 3
    assert may_take(LeaseRecord.from_spec(spec), "anyone", 0)


def test_lease_records_read_missing_or_odd_fields_as_empty() -> None:
    assert LeaseRecord.from_spec({"leaseDurationSeconds": "x"}) == LeaseRecord("", 0, "", "", 0)


def test_micro_time_is_utc_with_microseconds() -> None:
    assert micro_time(NOW) == "2026-08-21T06:20:39.123456Z"


@pytest.mark.parametrize(
    ("lease", "renew", "retry"), [(15, 15.0, 2.0), (15, 10.0, 10.0), (15, 10.0, 0.0)]
)
def test_timings_must_be_retry_below_renew_below_lease(
    lease: int, renew: float, retry: float
) -> None:
    with pytest.raises(ValueError, match="retry_period < renew_deadline < lease_duration"):
        LeaderElector(
            None,  # type: ignore[arg-type]
            identity="me",
            lease_duration_s=lease,
            renew_deadline_s=renew,
            retry_period_s=retry,
        )


class _HangingRenewal(LeaderElector):
    """The first Lease round succeeds; every later one hangs until the test lets it go."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__(
            None,  # type: ignore[arg-type]
            identity="me",
            lease_duration_s=15,
            renew_deadline_s=10.0,
            retry_period_s=0.001,
            monotonic=lambda: clock[0],
        )
        self.rounds = 0
        self.hanging = threading.Event()
        self.release = threading.Event()

    def try_acquire_or_renew(self) -> Attempt:
        self.rounds += 1
        if self.rounds == 1:
            return Attempt.LEADING
        self.hanging.set()
        self.release.wait(10)
        return Attempt.FAILED


def test_leadership_lapses_at_the_renew_deadline_while_a_lease_call_still_hangs() -> None:
    clock = [100.0]
    elector = _HangingRenewal(clock)
    elector.start()
    try:
        assert elector.hanging.wait(5), "the second round never started"
        assert elector.is_leader  # renewed at 100.0, nothing has lapsed yet
        clock[0] = 109.9
        assert elector.is_leader
        clock[0] = 110.0  # renew deadline (10 s) since the last successful renewal
        assert not elector.is_leader
        assert elector.rounds == 2  # ... and the renewal call has not returned
    finally:
        elector.release.set()
        elector.stop(release=False)


def test_a_lease_call_times_out_in_half_the_renew_deadline() -> None:
    assert lease_call_timeout(10.0) == 5.0
