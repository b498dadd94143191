"""`vgpu simulate --preemption` on the default scenario with its `train` workload at priority
1000: seconds per policy pair, with and without preemption, and what preemption did.

Each pair runs once in this process (the workload generated once, as `vgpu simulate` does).
`outcome` is a digest of everything the run decided (placements, evictions, waits, samples;
not the timings): two versions of the code that print the same digests decided alike. To put
the code of another commit beside this one, run this file with that checkout's sources first
on the path:

    .venv/bin/python bench/simulate_preemption.py
    git worktree add /tmp/base <commit>
    PYTHONPATH=/tmp/base/src .venv/bin/python bench/simulate_preemption.py
"""

import argparse
import hashlib
import json
import time

from fixture import machine

import vgpu
from vgpu.app.simulate.admission import Admissions
from vgpu.app.simulate.engine import ALL_PAIRS, PolicyPair, Simulation, typical_request
from vgpu.app.simulate.metrics import RunResult
from vgpu.app.simulate.scenario import Scenario, load_scenario
from vgpu.app.simulate.workload import generate_pods

PRIORITY = 1000


def prioritised() -> Scenario:
    """The embedded default scenario, its `train` pods at `PRIORITY`, preemption on."""
    scenario = load_scenario()
    workloads = [
        w.model_copy(update={"priority": PRIORITY}) if w.name == "train" else w
        for w in scenario.workloads
    ]
    return scenario.model_copy(update={"workloads": workloads, "preemption": True})


def digest(result: RunResult) -> str:
    text = json.dumps(result.outcome(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def timed(scenario: Scenario, pair: PolicyPair) -> tuple[RunResult, float, float]:
    pods = generate_pods(scenario, scenario.seed)
    admissions = Admissions()
    typical = typical_request(scenario, pods, admissions)
    wall, cpu = time.perf_counter(), time.process_time()
    result = Simulation(scenario, pair, pods, typical=typical, admissions=admissions).run()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default=",".join(p.label for p in ALL_PAIRS))
    args = parser.parse_args()
    on = prioritised()
    off = on.model_copy(update={"preemption": False})
    print(f"machine: {machine()}")
    print(f"vgpu from {vgpu.__file__}")
    print(f"{on.name}, train at priority {PRIORITY}, seed {on.seed}")
    header = (
        f"{'pair':<16}{'off: wall s':>12}{'CPU s':>7}{'on: wall s':>12}{'CPU s':>7}"
        f"{'placed':>8}{'by preempting':>15}{'evicted':>9}{'pending':>9}  outcome"
    )
    print(header)
    for label in args.policy.split(","):
        pair = PolicyPair.parse(label)
        _, off_wall, off_cpu = timed(off, pair)
        result, wall, cpu = timed(on, pair)
        preemptions = result.preemptions
        assert preemptions is not None
        print(
            f"{pair.label:<16}{off_wall:>12.2f}{off_cpu:>7.2f}{wall:>12.2f}{cpu:>7.2f}"
            f"{result.placed:>8}{preemptions.placed_by_preempting:>15}"
            f"{preemptions.evicted:>9}{result.pending_end:>9}  {digest(result)}"
        )


if __name__ == "__main__":
    main()
