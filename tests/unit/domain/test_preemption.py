"""Victim selection: the cheapest set of lower-priority pods whose release lets a pod fit."""

import doctest
from itertools import chain, combinations
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.domain.builders import card, container, pod
from vgpu.domain import DomainError, NodeView, SchedulingConfig, Usage, plan_pod, preemption_room
from vgpu.domain.fit import PodPlan
from vgpu.domain.preemption import Victim, choose_victims, fits_without
from vgpu.domain.preemption_room import Room
from vgpu.domain.quota import UNLIMITED, Budget

CONFIG = SchedulingConfig()
A, B = "GPU-a", "GPU-b"


def plan(
    namespace: str = "default", annotations: dict[str, str] | None = None, **limits: Any
) -> PodPlan:
    result = plan_pod(
        pod(container(**limits), name="waiting", namespace=namespace, annotations=annotations),
        CONFIG,
    )
    assert result is not None
    return result


def node(usage: dict[str, Usage], cards: int = 2, memory: int = 16000, count: int = 4) -> NodeView:
    devices = tuple(card(u, i, memory=memory, count=count) for i, u in enumerate((A, B)[:cards]))
    return NodeView("node-1", devices, usage)


def victim(
    key: str, uuid: str, memory: int, cores: int = 0, priority: int = 0, ns: str = "default"
) -> Victim:
    usage = Usage(1, memory, cores)
    return Victim(key, ns, priority, {uuid: usage}, usage)


def keys(chosen: tuple[Victim, ...] | None) -> list[str] | None:
    return None if chosen is None else sorted(v.key for v in chosen)


def total(victims: list[Victim]) -> dict[str, Usage]:
    usage: dict[str, Usage] = {}
    for v in victims:
        for uuid, amount in v.footprint.items():
            usage[uuid] = usage.get(uuid, Usage()) + amount
    return usage


def test_a_pod_that_fits_already_needs_no_victim() -> None:
    running = [victim("default/a", A, 4000)]
    assert choose_victims(plan(gpu=1, mem=8000), 100, node(total(running)), running) == ()


def test_one_large_victim_is_preferred_to_two_small_ones() -> None:
    running = [
        victim("default/small-1", A, 6000),
        victim("default/small-2", A, 6000),
        victim("default/big", B, 14000),
        victim("default/filler", B, 1000),
    ]
    chosen = choose_victims(plan(gpu=1, mem=12000), 100, node(total(running)), running)
    assert keys(chosen) == ["default/big"]


def test_among_equally_many_victims_the_lower_priority_goes() -> None:
    running = [
        victim("default/important", A, 16000, priority=50),
        victim("default/batch", B, 16000, priority=10),
    ]
    chosen = choose_victims(plan(gpu=1, mem=8000), 100, node(total(running)), running)
    assert keys(chosen) == ["default/batch"]


def test_among_equal_priorities_the_smaller_release_goes() -> None:
    running = [
        victim("default/a-big", A, 12000),
        victim("default/b-small", B, 9000),
    ]
    chosen = choose_victims(plan(gpu=1, mem=8000), 100, node(total(running)), running)
    assert keys(chosen) == ["default/b-small"]


def test_victims_of_equal_or_higher_priority_are_never_taken() -> None:
    running = [
        victim("default/peer", A, 16000, priority=100),
        victim("default/boss", B, 16000, priority=200),
    ]
    assert choose_victims(plan(gpu=1, mem=8000), 100, node(total(running)), running) is None


def test_a_node_where_no_set_helps_is_none() -> None:
    running = [victim("default/a", A, 1000)]
    assert choose_victims(plan(gpu=1, mem=20000), 100, node(total(running)), running) is None


def test_a_slice_limit_is_relieved_by_any_sharer() -> None:
    running = [victim(f"default/s{i}", A, 100, priority=i) for i in range(2)]
    chosen = choose_victims(
        plan(gpu=1, mem=100), 100, node(total(running), cards=1, count=2), running
    )
    assert keys(chosen) == ["default/s0"]


def test_quota_released_by_a_victim_elsewhere_in_the_namespace_counts() -> None:
    # The node has room; the namespace's quota does not, until team-a/old (on another node) goes.
    elsewhere = Victim("team-a/old", "team-a", 0, {}, Usage(1, 6000, 0))
    other_team = Victim("team-b/x", "team-b", 0, {}, Usage(1, 6000, 0))
    budget = Budget(memory=2000)
    waiting = plan(namespace="team-a", gpu=1, mem=6000)
    assert choose_victims(waiting, 100, node({}), [other_team], budget) is None
    assert keys(choose_victims(waiting, 100, node({}), [other_team, elsewhere], budget)) == [
        "team-a/old"
    ]


def test_a_blocked_namespace_is_never_helped() -> None:
    running = [victim("default/a", A, 16000)]
    blocked = Budget(memory=0, blocked=True)
    assert (
        choose_victims(plan(gpu=1, mem=8000), 100, node(total(running)), running, blocked) is None
    )


def test_past_the_search_bound_the_greedy_answer_fits_and_spares_what_it_can() -> None:
    running = [
        victim(f"default/p{i:02d}", A if i % 2 else B, 1000, priority=i % 3) for i in range(30)
    ]
    usage = total(running)
    waiting = plan(gpu=2, mem=4000)
    chosen = choose_victims(waiting, 100, node(usage, count=20), running, limit=10)
    assert chosen is not None
    assert fits_without(waiting, node(usage, count=20), UNLIMITED, chosen)
    for spared in chosen:
        rest = [v for v in chosen if v is not spared]
        assert not fits_without(waiting, node(usage, count=20), UNLIMITED, rest)


# brute force -------------------------------------------------------------------------------
def brute_force(
    waiting: PodPlan, priority: int, view: NodeView, running: list[Victim], budget: Budget
) -> tuple[Any, ...] | None:
    """Every subset, the preference spelled out independently: fewer victims, then the
    highest priority lowest (then the next), then fewer MiB, cores, slices released."""
    eligible = [v for v in running if v.priority < priority]
    subsets = chain.from_iterable(combinations(eligible, n) for n in range(len(eligible) + 1))
    best: tuple[Any, ...] | None = None
    for subset in subsets:
        if not fits_without(waiting, view, budget, subset):
            continue
        released = [
            sum(u.memory for v in subset for u in v.footprint.values()),
            sum(u.cores for v in subset for u in v.footprint.values()),
            sum(u.slices for v in subset for u in v.footprint.values()),
        ]
        rank = (len(subset), sorted((v.priority for v in subset), reverse=True), released)
        if best is None or rank < best:
            best = rank
    return best


def rank_of(chosen: tuple[Victim, ...]) -> tuple[Any, ...]:
    released = [
        sum(u.memory for v in chosen for u in v.footprint.values()),
        sum(u.cores for v in chosen for u in v.footprint.values()),
        sum(u.slices for v in chosen for u in v.footprint.values()),
    ]
    return (len(chosen), sorted((v.priority for v in chosen), reverse=True), released)


running_pods = st.lists(
    st.tuples(
        st.sampled_from([A, B]),
        st.integers(1, 8).map(lambda n: n * 1000),
        st.sampled_from([0, 10, 30, 50]),
        st.integers(0, 3),
        st.sampled_from(["default", "other"]),
    ),
    max_size=7,
)


@settings(max_examples=150, deadline=None)
@given(
    running=running_pods,
    memory=st.integers(1, 14).map(lambda n: n * 1000),
    cores=st.sampled_from([0, 20, 50, 100]),
    count=st.integers(1, 2),
    quota=st.one_of(st.none(), st.integers(0, 20).map(lambda n: n * 1000)),
)
def test_the_choice_is_optimal_against_brute_force(
    running: list[tuple[str, int, int, int, str]],
    memory: int,
    cores: int,
    count: int,
    quota: int | None,
) -> None:
    victims = []
    for i, (uuid, mem, core, prio, ns) in enumerate(running):
        # keep each card within capacity: a victim that would overflow it is not running there
        placed = total(victims).get(uuid, Usage())
        if placed.memory + mem > 16000 or placed.cores + core > 100 or placed.slices >= 4:
            continue
        victims.append(victim(f"{ns}/p{i}", uuid, mem, core, prio, ns))
    view = node(total(victims))
    budget = UNLIMITED if quota is None else Budget(memory=quota)
    waiting = plan(gpu=count, mem=memory, cores=cores)
    expected = brute_force(waiting, 40, view, victims, budget)
    chosen = choose_victims(waiting, 40, view, victims, budget)
    if expected is None:
        assert chosen is None
    else:
        assert chosen is not None
        assert fits_without(waiting, view, budget, chosen)
        assert rank_of(chosen) == expected


def test_a_pods_priority_is_read_from_its_spec() -> None:
    assert pod(container(gpu=1), priority=1000).priority == 1000
    assert pod(container(gpu=1)).priority == 0


def test_a_priority_that_is_not_an_integer_is_refused_by_name() -> None:
    with pytest.raises(DomainError, match=r"spec\.priority must be an integer"):
        pod(container(gpu=1), priority="high")


# the quick test ahead of the fit ---------------------------------------------------------------
CARDS = (("GPU-a", 16000), ("GPU-b", 16000), ("GPU-c", 24000))
# a running pod: its cards (one or two) and, on each, MiB and cores
holdings = st.lists(
    st.tuples(
        st.sets(st.sampled_from([c for c, _ in CARDS]), min_size=1, max_size=2),
        st.integers(1, 12).map(lambda n: n * 1000),
        st.sampled_from([0, 10, 30, 50, 100]),
    ),
    max_size=7,
)
requests = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"gpu": st.integers(1, 3), "mem": st.integers(1, 20).map(lambda n: n * 1000)}
        ),
        st.fixed_dictionaries({"gpu": st.integers(1, 3), "pct": st.sampled_from([25, 50, 100])}),
    ).flatmap(lambda limits: st.just(limits) | st.just({**limits, "cores": 50})),
    min_size=1,
    max_size=2,
)


@settings(max_examples=200, deadline=None)
@given(held=holdings, asked=requests)
def test_the_quick_test_never_throws_out_a_set_that_fits(
    held: list[tuple[set[str], int, int]], asked: list[dict[str, Any]]
) -> None:
    devices = tuple(card(uuid, i, memory=memory, count=4) for i, (uuid, memory) in enumerate(CARDS))
    capacity = {d.uuid: d for d in devices}
    victims: list[Victim] = []
    for i, (uuids, memory, cores) in enumerate(held):
        usage = total(victims)
        footprint = {uuid: Usage(1, memory, cores) for uuid in sorted(uuids)}
        if all((usage.get(u, Usage()) + f).fits_in(capacity[u]) for u, f in footprint.items()):
            victims.append(Victim(f"default/p{i}", "default", 0, footprint))
    view = NodeView("node-1", devices, total(victims))
    containers = [container(f"c{i}", **limits) for i, limits in enumerate(asked)]
    waiting = plan_pod(pod(*containers, name="waiting"), CONFIG)
    assert waiting is not None
    room = Room(waiting, view)
    fewest = room.fewest([v.footprint for v in victims])
    every_set = chain.from_iterable(combinations(victims, n) for n in range(len(victims) + 1))
    for chosen in every_set:
        if fits_without(waiting, view, UNLIMITED, chosen):
            assert room.may_fit(v.footprint for v in chosen)
            assert len(chosen) >= fewest


def test_the_quick_tests_docstring_example_holds() -> None:
    result = doctest.testmod(preemption_room)
    assert (result.attempted > 0, result.failed) == (True, 0)
