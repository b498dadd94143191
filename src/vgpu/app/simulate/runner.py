"""Run one scenario under several policy pairs, in parallel processes when asked."""

import multiprocessing
import queue
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from .admission import Admissions
from .dra import DraMode
from .engine import PolicyPair, Simulation, typical_request
from .metrics import RunResult, TypicalRequest
from .progress import Progress
from .scenario import Scenario
from .workload import generate_pods


def run_pairs(
    scenario: Scenario,
    pairs: Sequence[PolicyPair | DraMode],
    seed: int,
    *,
    jobs: int = 1,
    progress: Progress | None = None,
) -> list[RunResult]:
    """The same seeded workload under every pair (or with DRA), results in the order of
    `pairs`.

    With `jobs` > 1 the runs go to that many worker processes (one run each at a time).
    """
    report = progress or (lambda _: None)
    if jobs <= 1 or len(pairs) <= 1:
        pods = generate_pods(scenario, seed)
        admissions = Admissions()  # every run admits the same pods alike: once for all
        typical = typical_request(scenario, pods, admissions)
        results = []
        for i, pair in enumerate(pairs):

            def step(fraction: float, done: int = i) -> None:
                report((done + fraction) / len(pairs))

            simulation = Simulation(scenario, pair, pods, typical=typical, admissions=admissions)
            results.append(simulation.run(step))
        return results
    return _in_processes(scenario, pairs, seed, min(jobs, len(pairs)), report)


def _in_processes(
    scenario: Scenario,
    pairs: Sequence[PolicyPair | DraMode],
    seed: int,
    jobs: int,
    report: Progress,
) -> list[RunResult]:
    fractions = [0.0] * len(pairs)
    typical = typical_request(scenario, generate_pods(scenario, seed))
    with multiprocessing.Manager() as manager:
        updates: Any = manager.Queue()
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [
                pool.submit(_run_one, scenario, pair, seed, typical, updates, i)
                for i, pair in enumerate(pairs)
            ]
            while not all(f.done() for f in futures):
                try:
                    index, fraction = updates.get(timeout=0.1)
                except queue.Empty:
                    continue
                fractions[index] = fraction
                report(sum(fractions) / len(fractions))
            return [f.result() for f in futures]


def _run_one(
    scenario: Scenario,
    pair: PolicyPair | DraMode,
    seed: int,
    typical: TypicalRequest,
    updates: Any,
    index: int,
) -> RunResult:
    last = [-1]

    def step(fraction: float) -> None:
        percent = int(fraction * 100)
        if percent != last[0]:  # at most a hundred messages per run
            last[0] = percent
            updates.put((index, fraction))

    pods = generate_pods(scenario, seed)
    return Simulation(scenario, pair, pods, typical=typical).run(step)
