"""The policy pieces on their own: node score before and after, the pod's policy, examples."""

import doctest
from types import ModuleType

import pytest

from tests.unit.domain.builders import card
from vgpu.domain import (
    DeviceGrant,
    NodeView,
    PodPolicies,
    Policy,
    ScoringWeights,
    Usage,
    codec,
    fit,
    node_health,
    node_score,
    nodelock,
    pod_policies,
    policy,
    policy_chain,
    reasons,
    scoring_weights,
    topology,
)
from vgpu.domain.mig import geometry


def test_node_score_before_and_after_a_placement() -> None:
    node = NodeView("n", (card("GPU-0", 0, count=4, memory=40000),), {"GPU-0": Usage(1, 10000, 0)})
    grants = ((DeviceGrant("GPU-0", "NVIDIA", 10000, 50),),)
    assert node_score(node) == pytest.approx(0.25 + 0.25)
    assert node_score(node, Policy.BINPACK, grants) == pytest.approx(0.5 + 0.5 + 0.5)
    assert node_score(node, Policy.SPREAD, grants) == pytest.approx(3.0 - 1.5)


def test_init_containers_do_not_add_to_the_app_containers_hold() -> None:
    node = NodeView("n", (card("GPU-0", 0, count=4, memory=40000, cores=100),), {})
    init = (DeviceGrant("GPU-0", "NVIDIA", 20000, 0),)
    app = (DeviceGrant("GPU-0", "NVIDIA", 10000, 0),)
    assert node_score(node, Policy.BINPACK, (init, app), init_count=1) == pytest.approx(0.25 + 0.5)


def test_which_policy_applies_to_a_pod() -> None:
    defaults = PodPolicies(node=Policy.SPREAD)
    annotations = {
        "hami.io/gpu-scheduler-policy": "topology-aware, mutex",
        "hami.io/device-scoring-weights": "slot=2,core=0,memory=1",
    }
    assert pod_policies(annotations, defaults) == PodPolicies(
        node=Policy.SPREAD,
        gpu=Policy.SPREAD,
        idle_only=True,
        topology=True,
        weights=ScoringWeights(2, 0, 1),
    )
    assert pod_policies({}, defaults) == defaults


@pytest.mark.parametrize(
    "module",
    [
        codec,
        fit,
        geometry,
        node_health,
        nodelock,
        policy,
        policy_chain,
        reasons,
        scoring_weights,
        topology,
    ],
)
def test_docstring_examples_hold(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_topology_aware_alone_orders_like_spread_whatever_the_default() -> None:
    binpack = PodPolicies(gpu=Policy.BINPACK)
    alone = pod_policies({"hami.io/gpu-scheduler-policy": "topology-aware"}, binpack)
    assert (alone.gpu, alone.topology) == (Policy.SPREAD, True)
    both = pod_policies({"hami.io/gpu-scheduler-policy": "topology-aware,binpack"}, binpack)
    assert (both.gpu, both.topology) == (Policy.BINPACK, True)
