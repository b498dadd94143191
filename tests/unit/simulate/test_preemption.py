"""Preemption in the simulator: who is evicted, who never is, and what the output shows."""

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from vgpu.app.cli import main
from vgpu.app.simulate.engine import HAMI_DEFAULT, PolicyPair, Simulation, State
from vgpu.app.simulate.metrics import Preemptions, RunResult
from vgpu.app.simulate.report import document, table
from vgpu.app.simulate.scenario import Scenario, ScenarioError, parse_scenario
from vgpu.app.simulate.workload import PodArrival, generate_pods
from vgpu.domain import Policy, preemption
from vgpu.domain.preemption_room import Footprint, Room

from .builders import TINY, arrival, cluster

HOUR = 3600.0
PREEMPTION_ON = "preemption: true"


def run(scenario: Scenario, pods: list[PodArrival]) -> tuple[Simulation, RunResult]:
    simulation = Simulation(scenario, HAMI_DEFAULT, pods)
    return simulation, simulation.run()


def test_a_high_priority_pod_evicts_only_the_lowest_priority_pod_it_needs_gone() -> None:
    pods = [
        arrival("mid", 0, 10 * HOUR, priority=5, gpu=1, gpumem=20000),
        arrival("low", 10, 10 * HOUR, priority=1, gpu=1, gpumem=20000),
        arrival("high", 60, HOUR, priority=10, gpu=1, gpumem=20000),
    ]
    simulation, result = run(cluster(gpus=1, extra=PREEMPTION_ON), pods)
    mid, low, high = simulation.pods
    assert (mid.state, high.state) == (State.RUNNING, State.FINISHED)
    assert high.placed_at == 60  # placed at once, by evicting
    # the victim waited from its eviction until the high-priority pod ended
    assert low.state is State.RUNNING
    assert low.placed_at == 60 + HOUR
    assert result.preemptions == Preemptions(placed_by_preempting=1, evicted=1)
    assert (result.placed, result.placed - result.placed_at_once) == (3, 1)
    assert result.wait_mean == HOUR


def test_the_victims_come_from_the_node_where_they_cost_least() -> None:
    pods = [
        arrival("a", 0, 10 * HOUR, priority=3, gpu=1),
        arrival("b", 1, 10 * HOUR, priority=1, gpu=1),
        arrival("urgent", 60, HOUR, priority=10, gpu=1),
    ]
    simulation, result = run(cluster(gpus=1, nodes=2, extra=PREEMPTION_ON), pods)
    a, b, urgent = simulation.pods
    assert (urgent.node, urgent.placed_at) == ("n-1", 60)  # b, the cheaper victim, was there
    assert (a.node, a.placed_at) == ("n-0", 0)
    assert (b.node, b.placed_at) == ("n-1", 60 + HOUR)  # back once the urgent pod ended
    assert result.preemptions == Preemptions(placed_by_preempting=1, evicted=1)


@pytest.mark.parametrize("priority", [5, 4], ids=["equal", "lower"])
def test_a_pod_never_evicts_pods_of_equal_or_higher_priority(priority: int) -> None:
    pods = [
        arrival("first", 0, 10 * HOUR, priority=5, gpu=1, gpumem=20000),
        arrival("second", 1, 10 * HOUR, priority=7, gpu=1, gpumem=20000),
        arrival("late", 60, HOUR, priority=priority, gpu=1, gpumem=20000),
    ]
    simulation, result = run(cluster(gpus=1, extra=PREEMPTION_ON), pods)
    assert [p.state for p in simulation.pods] == [State.RUNNING, State.RUNNING, State.PENDING]
    assert result.preemptions == Preemptions(placed_by_preempting=0, evicted=0)


def test_without_preemption_priorities_change_nothing() -> None:
    pods = [
        arrival("low", 0, 10 * HOUR, priority=1, gpu=1),
        arrival("high", 60, HOUR, priority=10, gpu=1),
    ]
    simulation, result = run(cluster(gpus=1), pods)
    assert [p.state for p in simulation.pods] == [State.RUNNING, State.PENDING]
    assert result.preemptions is None


def _prioritised(text: str) -> str:
    """TINY with its `big` pods above the `small` ones."""
    return text.replace(
        "    gpus: {choices: [1, 2]}", "    gpus: {choices: [1, 2]}\n    priority: 100"
    )


def _without_timings(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if "decisions/s" not in line)


def test_with_preemption_off_the_table_and_json_are_as_before() -> None:
    plain = parse_scenario(TINY, "tiny")
    prioritised = parse_scenario(_prioritised(TINY), "tiny")
    results = []
    for scenario in (plain, prioritised):
        _, result = run(scenario, generate_pods(scenario, 3))
        results.append(result)
    before, after = results
    assert after.outcome() == before.outcome()
    assert "preemption" not in json.dumps(document(prioritised, 3, [after]))
    assert _without_timings(table(prioritised, 3, [after])) == _without_timings(
        table(plain, 3, [before])
    )
    assert "preempt" not in table(prioritised, 3, [after])


def test_the_preemption_flag_adds_its_counts_to_table_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(_prioritised(TINY))
    common = ["simulate", "--jobs", "1", "--no-progress", "--scenario", str(path)]
    assert main([*common, "--policy", "binpack/spread", "--preemption", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["scenario"]["preemption"] is True
    counts = data["runs"][0]["preemption"]
    assert counts["placed_by_preempting"] > 0
    assert counts["evicted"] >= counts["placed_by_preempting"]
    assert main([*common, "--preemption"]) == 0
    out = capsys.readouterr().out
    assert "preemption on" in out
    assert "evicted by preemption" in out and "placed by preempting" in out


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("priority: high", "workloads[0].priority"),
        ("priority: 2000000000", "workloads[0].priority"),
    ],
)
def test_a_bad_priority_is_refused_naming_the_field(line: str, field: str) -> None:
    text = TINY.replace("    namespace: team\n", f"    namespace: team\n    {line}\n", 1)
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, "tiny")
    assert f"tiny: {field}" in str(caught.value)


def test_a_bad_preemption_option_is_refused_naming_it() -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(TINY + "preemption: sometimes\n", "tiny")
    assert "tiny: preemption" in str(caught.value)


CROWDED = """
name: crowded
seed: 5
duration: 12h
sample_every: 10m
preemption: true
nodes:
  - {name: n, count: 3, gpus: 4, memory: 40Gi, split_count: 10}
workloads:
  - name: small
    arrivals_per_hour: 12
    gpus: {choices: [1, 2], weights: [4, 1]}
    memory: {min: 2Gi, max: 10Gi}
    cores: {min: 5, max: 25}
    runtime: {distribution: lognormal, median: 4h, sigma: 0.5}
  - name: train
    arrivals_per_hour: 1
    start: 1h
    gpus: {choices: [2, 3, 4]}
    runtime: {distribution: fixed, value: 1h}
    priority: 1000
"""


class EverySet(Room):
    """The victim search as it was before the quick test: every set goes to the full fit."""

    def may_fit(self, footprints: Iterable[Footprint]) -> bool:
        return True

    def fewest(self, footprints: Sequence[Footprint]) -> int:
        return 0


def test_the_quick_victim_test_changes_no_placement_and_no_eviction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # small pods spread over every card, whole-card jobs evicting many of them at a time
    scenario = parse_scenario(CROWDED, "crowded")
    pods = generate_pods(scenario, scenario.seed)
    pair = PolicyPair(Policy.SPREAD, Policy.SPREAD)
    runs = []
    for search in (Room, EverySet):
        monkeypatch.setattr(preemption, "Room", search)
        simulation = Simulation(scenario, pair, pods)
        result = simulation.run()
        runs.append(
            (
                [(p.key, p.state, p.node, p.placed_at, p.finish_at) for p in simulation.pods],
                result.outcome(),
            )
        )
        assert result.preemptions is not None and result.preemptions.evicted > 50
    assert runs[0] == runs[1]
