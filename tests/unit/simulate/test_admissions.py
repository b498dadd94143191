"""One admission memo serves every policy pair's run of the same workload."""

from vgpu.app.simulate.admission import Admissions
from vgpu.app.simulate.engine import ALL_PAIRS, Simulation, typical_request
from vgpu.app.simulate.runner import run_pairs
from vgpu.app.simulate.workload import generate_pods
from vgpu.domain import Budget, PodPolicies
from vgpu.domain.policy import Policy

from .builders import arrival, contended

SPREAD = PodPolicies(node=Policy.SPREAD, gpu=Policy.SPREAD)


def test_each_call_gets_its_own_default_policies_and_the_pods_annotation_wins() -> None:
    plain = arrival("a", 0, 60, gpu=1, gpumem=1000)
    pinned = arrival("b", 0, 60, gpu=1, gpumem=1000)
    pinned.manifest["metadata"]["annotations"] = {"hami.io/node-scheduler-policy": "binpack"}
    admissions = Admissions()
    binpack = admissions.plan(0, plain.manifest, Budget(), PodPolicies())
    spread = admissions.plan(0, plain.manifest, Budget(), SPREAD)
    assert not isinstance(binpack, str) and not isinstance(spread, str)
    assert (binpack.policies.node, spread.policies.node) == (Policy.BINPACK, Policy.SPREAD)
    own = admissions.plan(1, pinned.manifest, Budget(), SPREAD)
    assert not isinstance(own, str) and own.policies.node is Policy.BINPACK


def test_a_denial_is_told_per_budget() -> None:
    pod = arrival("a", 0, 60, gpu=1, gpumem=1000)
    admissions = Admissions()
    assert isinstance(admissions.plan(0, pod.manifest, Budget(blocked=True), SPREAD), str)
    assert not isinstance(admissions.plan(0, pod.manifest, Budget(), SPREAD), str)
    unreadable = arrival("b", 0, 60, gpu=1, gpumem="lots")
    assert isinstance(admissions.plan(1, unreadable.manifest, Budget(), SPREAD), str)


def test_a_scenario_pod_with_a_huge_scoring_weight_is_not_created_and_says_why() -> None:
    pod = arrival("a", 0, 60, gpu=1, gpumem=1000)
    weights = f"slot={'9' * 256000},core=1,memory=1"
    pod.manifest["metadata"]["annotations"] = {"hami.io/device-scoring-weights": weights}
    why = Admissions().plan(0, pod.manifest, Budget(), SPREAD)
    assert isinstance(why, str) and "annotation hami.io/device-scoring-weights" in why


def test_runs_sharing_a_memo_end_as_runs_on_their_own() -> None:
    scenario = contended()
    shared = run_pairs(scenario, list(ALL_PAIRS), scenario.seed)
    pods = generate_pods(scenario, scenario.seed)
    typical = typical_request(scenario, pods)
    for pair, result in zip(ALL_PAIRS, shared, strict=True):
        alone = Simulation(scenario, pair, pods, typical=typical).run()
        assert result.outcome() == alone.outcome()
