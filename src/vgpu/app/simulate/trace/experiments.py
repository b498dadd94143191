"""Replays of one trace under several policies and seeds, in worker processes when asked, and
what they give per policy: the allocation ratio's mean and spread over the seeds."""

import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

from ..progress import Progress
from .replay import Replay, Trace, TracePolicy, replay


@dataclass(frozen=True, slots=True)
class Spread:
    mean: float
    sd: float  # sample standard deviation over the seeds; 0 for one seed
    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> "Spread":
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(round(statistics.fmean(values), 2), round(sd, 2), tuple(values))


@dataclass(frozen=True, slots=True)
class PolicyRuns:
    """One policy's replays, one per seed, in seed order."""

    policy: TracePolicy
    replays: tuple[Replay, ...]

    def at(self, arrived: int) -> Spread | None:
        """The allocation ratio at `arrived` % over the seeds that reached it."""
        values = [r.allocation[arrived] for r in self.replays if arrived in r.allocation]
        return Spread.of(values) if values else None

    def curve(self) -> dict[int, float]:
        """The mean allocation ratio at every arrived percent all seeds reached."""
        shared = set.intersection(*(set(r.allocation) for r in self.replays))
        return {
            x: round(statistics.fmean(r.allocation[x] for r in self.replays), 2)
            for x in sorted(shared)
        }

    def mean(self, value: Callable[[Replay], float]) -> float:
        return statistics.fmean(value(r) for r in self.replays)


def run_policies(
    trace: Trace,
    policies: Sequence[TracePolicy],
    seeds: Sequence[int],
    *,
    jobs: int = 1,
    progress: Progress | None = None,
) -> list[PolicyRuns]:
    """Every policy under every seed; with `jobs` > 1 in that many worker processes."""
    report = progress or (lambda _: None)
    work = [(policy, seed) for policy in policies for seed in seeds]
    done: dict[tuple[TracePolicy, int], Replay] = {}
    if jobs <= 1 or len(work) <= 1:
        for policy, seed in work:
            done[policy, seed] = replay(trace, policy, seed)
            report(len(done) / len(work))
    else:
        with ProcessPoolExecutor(max_workers=min(jobs, len(work))) as pool:
            futures = {pool.submit(replay, trace, p, s): (p, s) for p, s in work}
            for future in as_completed(futures):
                done[futures[future]] = future.result()
                report(len(done) / len(work))
    return [PolicyRuns(p, tuple(done[p, s] for s in seeds)) for p in policies]
