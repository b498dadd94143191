"""The replay protocol on tiny traces: tuning the stream, ranks, the metric and its rounding."""

import doctest
import random
from types import ModuleType

import pytest

from vgpu.app.simulate.trace import hami, protocol
from vgpu.app.simulate.trace import replay as replay_module
from vgpu.app.simulate.trace.files import TraceNode, TracePod
from vgpu.app.simulate.trace.protocol import arrivals, node_ranks, percent, share
from vgpu.app.simulate.trace.replay import Trace, replay
from vgpu.domain.fragmentation import MilliNode, MilliPod, PaperPolicy

SHARE = MilliPod(1000, 1024, 1, 500)
PAIR = MilliPod(2000, 2048, 2, 1000)
CPU = MilliPod(500, 512)


def test_a_light_trace_is_topped_up_with_draws_until_the_next_would_pass_130_percent() -> None:
    pods = [SHARE, PAIR, CPU]
    stream = arrivals(pods, capacity=10_000, rng=random.Random(4))
    assert sorted(stream[:3], key=id) == sorted(pods, key=id)  # every pod, shuffled, first
    total = sum(p.gpu_milli for p in stream)
    # the draw that stopped it would have passed 13,000 with its share of one card (<= 1,000);
    # the last one kept passed 12,000 at most, so a pair could take the total to 14,000
    assert 12_000 < total <= 14_000
    assert set(stream[3:]) <= set(pods)


def test_the_check_for_the_next_draw_adds_its_share_of_one_card_only() -> None:
    # 12,000 asked; a two-card pod (2,000) would pass 13,000 in total, but the test adds 1,000
    pods = [MilliPod(0, 0, 2, 1000)] * 6
    stream = arrivals(pods, capacity=10_000, rng=random.Random(0))
    assert len(stream) == 7 and sum(p.gpu_milli for p in stream) == 14_000


def test_a_heavy_trace_loses_random_pods_until_it_asks_at_most_130_percent() -> None:
    pods = [PAIR] * 10 + [SHARE] * 10
    stream = arrivals(pods, capacity=10_000, rng=random.Random(2))
    total = sum(p.gpu_milli for p in stream)
    assert 13_000 - 2000 < total <= 13_000
    assert len(stream) < len(pods)


def test_a_trace_without_gpu_pods_is_left_as_it_is() -> None:
    assert len(arrivals([CPU] * 3, capacity=1000, rng=random.Random(0))) == 3


def test_ranks_are_a_permutation_drawn_from_the_seed() -> None:
    ranks = node_ranks(50, random.Random(9))
    assert sorted(ranks) == list(range(50))
    assert ranks == node_ranks(50, random.Random(9)) != node_ranks(50, random.Random(10))


def test_percentages_round_half_to_even_as_the_paper_does() -> None:
    assert percent(5 * 10 * 4 + 20, 4) == 6  # 5.5 % of 4 cards -> 6
    assert percent(4 * 10 * 4 + 20, 4) == 4  # 4.5 % -> 4
    assert share(1234, 4) == 30.85
    assert share(1, 3) == 0.03


def tiny_trace(pods: list[MilliPod]) -> Trace:
    nodes = [
        TraceNode("a", MilliNode("T4", 4000, 8192, (1000,))),
        TraceNode("b", MilliNode("T4", 4000, 8192, (1000,))),
    ]
    return Trace.of("tiny", nodes, [TracePod(f"p{i:02d}", p) for i, p in enumerate(pods)])


def test_failed_pods_count_as_arrived_and_the_ratio_is_the_mean_over_pods_at_each_percent() -> None:
    # two cards; whole-card pods: the stream is 2 whole cards (100 %) then a 3rd that fails
    # (130 % would need 2,600: the third draw's 1,000 would pass it)
    trace = tiny_trace([MilliPod(0, 0, 1, 1000)] * 2)
    result = replay(trace, PaperPolicy.BESTFIT, seed=1)
    assert result.pods == 2 and result.placed == 2
    assert result.allocation[50] == 50.0 and result.allocation[100] == 100.0
    assert 75 not in result.allocation  # no pod within a point of 75 %
    heavy = tiny_trace([MilliPod(0, 0, 1, 600)] * 4)  # 4 x 600 = 2,400 <= 2,600: kept, no draw fits
    result = replay(heavy, PaperPolicy.BESTFIT, seed=1)
    assert (result.pods, result.placed, result.failed) == (4, 2, 2)
    # after each pod: arrived 30, 60, 90, 120 %; allocated 30, 60, 60, 60 %
    assert result.allocation[90] == 60.0 and result.allocation[120] == 60.0
    assert result.allocation[31] == 30.0  # from its neighbour 30


def test_the_same_seed_gives_the_same_replay_and_ties_go_to_the_lowest_rank() -> None:
    trace = tiny_trace([MilliPod(0, 0, 1, 1000)])
    chosen = set()
    for seed in range(8):
        first, again = replay(trace, PaperPolicy.FGD, seed), replay(trace, PaperPolicy.FGD, seed)
        assert first.allocation == again.allocation
    # ranks decide among the two equal nodes: both get chosen across seeds
    for seed in range(8):
        rng = random.Random(seed)
        arrivals(trace.pods, 2000, rng)
        chosen.add(node_ranks(2, rng).index(0))
    assert chosen == {0, 1}


@pytest.mark.parametrize("policy", list(PaperPolicy))
def test_every_policy_replays_a_tiny_trace(policy: PaperPolicy) -> None:
    trace = tiny_trace([SHARE, CPU, MilliPod(100, 0, 1, 300)])
    result = replay(trace, policy, seed=3)
    assert 0 < result.placed <= result.pods
    assert max(result.allocation.values()) <= 100.0


@pytest.mark.parametrize("module", [hami, protocol, replay_module])
def test_docstring_examples_hold(module: ModuleType) -> None:
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0
