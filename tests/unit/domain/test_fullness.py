"""Fullness, the number binpack and spread rank cards and nodes by."""

from hypothesis import given
from hypothesis import strategies as st

from vgpu.domain.policy import Policy, fullness_of, preference


def test_fullness_sums_the_used_share_of_each_resource() -> None:
    assert fullness_of(5, 10, 50, 100, 40_000, 80_000) == 1.5


def test_a_resource_without_capacity_counts_as_empty() -> None:
    assert fullness_of(3, 0, 10, 0, 10, 0) == 0.0


fullness = st.integers(0, 3_000_000).map(lambda n: n / 1_000_000)  # what real cards produce


@given(fullness, fullness)
def test_binpack_and_spread_rank_in_opposite_orders(a: float, b: float) -> None:
    binpack = preference(Policy.BINPACK, a) > preference(Policy.BINPACK, b)
    spread = preference(Policy.SPREAD, a) < preference(Policy.SPREAD, b)
    assert binpack == spread
