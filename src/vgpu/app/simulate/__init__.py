"""`vgpu simulate`: run a seeded GPU workload through vgpu's admission, filter and ledger on a
simulated cluster and compare node/GPU scheduling policies. See docs/simulate.md."""

from .engine import ALL_PAIRS, PolicyPair, Simulation
from .metrics import RunResult
from .runner import run_pairs
from .scenario import Scenario, ScenarioError, load_scenario, parse_scenario
from .workload import PodArrival, generate_pods

__all__ = [
    "ALL_PAIRS",
    "PodArrival",
    "PolicyPair",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "Simulation",
    "generate_pods",
    "load_scenario",
    "parse_scenario",
    "run_pairs",
]
