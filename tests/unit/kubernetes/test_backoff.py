"""Backoff delays for reconnecting watches and retrying optimistic writes."""

import pytest

from vgpu.adapters.kubernetes.backoff import Backoff, retry_delays


def test_delays_double_up_to_the_cap_and_reset_after_success() -> None:
    backoff = Backoff(initial=0.1, factor=2, cap=0.5, jitter=0, rand=lambda: 0.5)
    assert [backoff.next_delay() for _ in range(5)] == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])
    backoff.reset()
    assert backoff.next_delay() == pytest.approx(0.1)


def test_jitter_stretches_each_delay_by_at_most_its_fraction() -> None:
    low = Backoff(initial=1, cap=10, jitter=0.2, rand=lambda: 0.0)
    high = Backoff(initial=1, cap=10, jitter=0.2, rand=lambda: 1.0)
    assert low.next_delay() == pytest.approx(1.0)
    assert high.next_delay() == pytest.approx(1.2)


def test_retry_delays_are_one_fewer_than_the_attempts_starting_at_100ms() -> None:
    assert list(retry_delays(5, jitter=0)) == pytest.approx([0.1, 0.2, 0.4, 0.8])
    assert list(retry_delays(1)) == []


def test_nonsense_settings_are_refused_with_the_values() -> None:
    with pytest.raises(ValueError, match="initial=0"):
        Backoff(initial=0)


def test_a_watch_that_fails_forever_keeps_getting_the_capped_delay() -> None:
    backoff = Backoff(initial=0.2, cap=30, jitter=0)
    delays = [backoff.next_delay() for _ in range(5000)]
    assert delays[-1] == pytest.approx(30)
    assert backoff.failures == 5000
