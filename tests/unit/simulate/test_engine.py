"""The engine: placement, waiting, release, quota, determinism, and the retry shortcut."""

from vgpu.app.simulate.engine import ALL_PAIRS, HAMI_DEFAULT, PolicyPair, Simulation, State
from vgpu.app.simulate.metrics import RunResult
from vgpu.app.simulate.scenario import Scenario, parse_scenario
from vgpu.app.simulate.workload import PodArrival, generate_pods
from vgpu.domain import Policy

from .builders import arrival, cluster, contended, tiny

HOUR = 3600.0


def run(
    scenario: Scenario, pods: list[PodArrival], pair: PolicyPair = HAMI_DEFAULT
) -> tuple[Simulation, RunResult]:
    simulation = Simulation(scenario, pair, pods)
    return simulation, simulation.run()


def test_a_pod_that_fits_nowhere_stays_pending_with_the_reason() -> None:
    pods = [arrival("huge", 10, HOUR, gpu=1, gpumem=60000)]
    _, result = run(cluster(gpus=2, nodes=2), pods)
    assert (result.placed, result.pending_end) == (0, 1)
    assert result.pending_reasons.counts == (("insufficient memory", 1),)
    example = dict(result.pending_reasons.examples)["insufficient memory"]
    assert "default/huge: 0/2 nodes are available: 2 insufficient memory" in example
    assert "need 60000 MiB" in example


def test_a_pod_asking_for_more_cards_than_a_node_has_says_so() -> None:
    _, result = run(cluster(gpus=2), [arrival("wide", 0, HOUR, gpu=4)])
    assert result.pending_reasons.counts == (("not enough cards", 1),)


def test_a_finished_pod_frees_its_card_for_the_pod_waiting_behind_it() -> None:
    pods = [arrival("first", 0, HOUR, gpu=1), arrival("second", 60, HOUR, gpu=1)]
    simulation, result = run(cluster(gpus=1, duration="90m"), pods)
    first, second = simulation.pods
    assert first.state is State.FINISHED
    assert second.state is State.RUNNING
    assert second.placed_at == HOUR  # the moment the first one ended
    assert (result.placed, result.placed_at_once, result.pending_end) == (2, 1, 0)
    assert result.wait_mean == HOUR - 60


def test_shared_cards_take_pods_up_to_their_memory() -> None:
    pods = [arrival(f"p{i}", i, HOUR, gpu=1, gpumem=15000, gpucores=10) for i in range(3)]
    simulation, _ = run(cluster(gpus=1, duration="30m"), pods)
    assert [p.state for p in simulation.pods] == [State.RUNNING, State.RUNNING, State.PENDING]
    assert (
        simulation.ledger.usage("n-0", simulation.ledger.view("n-0").devices[0].uuid).memory
        == 30000
    )


def test_a_whole_card_pod_gets_all_cores_from_the_webhook() -> None:
    _, result = run(cluster(gpus=2, duration="1h"), [arrival("train", 0, 2 * HOUR, gpu=2)])
    assert result.series.cores[-1] == 1.0
    assert result.series.memory[-1] == 1.0


def test_binpack_keeps_whole_cards_free_where_spread_strands_a_training_pod() -> None:
    small = [arrival(f"s{i}", i, 10 * HOUR, gpu=1, gpumem=8000, gpucores=10) for i in range(2)]
    pods = [*small, arrival("train", 100, HOUR, gpu=1)]
    outcomes = {}
    for gpu in Policy:
        simulation, _ = run(cluster(gpus=2, duration="1h"), pods, PolicyPair(Policy.BINPACK, gpu))
        outcomes[gpu] = simulation.pods[-1].state
    # FGD and FGD-balanced: the second small pod strands nothing on either card, so it takes
    # the lowest index
    assert outcomes == {
        Policy.BINPACK: State.RUNNING,
        Policy.SPREAD: State.PENDING,
        Policy.FGD: State.RUNNING,
        Policy.FGD_BALANCED: State.RUNNING,
    }


QUOTA = """
namespaces:
  - name: team
    quota: {gpumem: 20000}
"""


def test_the_namespace_quota_is_never_exceeded() -> None:
    scenario = cluster(gpus=4, nodes=2, duration="6h", extra=QUOTA)
    pods = [
        arrival(f"p{i:02d}", i * 600, 1.5 * HOUR, namespace="team", gpu=1, gpumem=6000)
        for i in range(30)
    ]
    simulation, result = run(scenario, pods)
    assert result.denied > 0  # the quota really was the limit
    assert "exceeding resource quota in namespace team" in result.denied_reasons.top()
    placed = [p for p in simulation.pods if p.placed_at >= 0]
    edges = sorted(
        [(p.placed_at, 6000) for p in placed]
        + [(p.placed_at + p.arrival.runtime, -6000) for p in placed]
    )
    in_use, peak = 0, 0
    for _, change in edges:
        in_use += change
        peak = max(peak, in_use)
    assert peak == 18000  # three pods, never a fourth


def test_the_same_seed_gives_the_same_result_and_another_seed_does_not() -> None:
    scenario = tiny()

    def outcome(seed: int) -> dict[str, object]:
        return Simulation(scenario, HAMI_DEFAULT, generate_pods(scenario, seed)).run().outcome()

    assert outcome(7) == outcome(7)
    assert outcome(7) != outcome(8)


def test_the_retry_shortcut_changes_no_outcome() -> None:
    """Retrying only changed nodes and skipping known refusals gives what full retries give."""
    scenario = contended()
    for seed in (1, 2):
        pods = generate_pods(scenario, seed)
        for pair in ALL_PAIRS:
            quick = Simulation(scenario, pair, pods).run()
            full = Simulation(scenario, pair, pods, incremental=False).run()
            assert quick.placed > quick.placed_at_once  # the Pending queue was exercised
            assert quick.outcome()["pods"] == full.outcome()["pods"]
            assert quick.outcome()["series"] == full.outcome()["series"]
            assert quick.pending_reasons == full.pending_reasons
            assert quick.decide_calls < full.decide_calls


def test_policy_pairs_parse_and_name_the_bad_part() -> None:
    assert PolicyPair.parse("Spread/binpack") == PolicyPair(Policy.SPREAD, Policy.BINPACK)
    assert [p.label for p in ALL_PAIRS] == [
        "binpack/binpack",
        "binpack/spread",
        "spread/binpack",
        "spread/spread",
    ]
    for text, words in (("binpack", "must be NODE/GPU"), ("binpack/tight", "GPU policy 'tight'")):
        try:
            PolicyPair.parse(text)
        except ValueError as exc:
            assert words in str(exc)
        else:
            raise AssertionError(f"{text} was accepted")


def test_a_pod_pinned_to_a_model_waits_for_that_models_capacity_not_the_other_nodes() -> None:
    scenario = parse_scenario(
        """
duration: 1h
nodes:
  - {name: a100, count: 1, gpus: 1, memory: 80Gi}
  - {name: t4, count: 3, gpus: 1, model: Tesla T4, memory: 15360}
workloads:
  - {name: unused, arrivals_per_hour: 1, runtime: {distribution: fixed, value: 1h}}
"""
    )
    pinned = {"nvidia.com/use-gputype": "A100"}
    first = arrival("first", 0, 2 * HOUR, gpu=1)
    second = arrival("second", 10, HOUR, gpu=1, gpumem=40000)
    for pod in (first, second):
        pod.manifest["metadata"]["annotations"] = pinned
    _, result = run(scenario, [first, second])
    assert result.pending_reasons.counts == (("insufficient memory", 1),)
    example = dict(result.pending_reasons.examples)["insufficient memory"]
    assert "0/4 nodes are available: 3 type mismatch, 1 insufficient memory" in example
