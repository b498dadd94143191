"""One replay of an openb workload per policy (`vgpu simulate --trace`'s unit of work), timed,
beside a baseline that asks every node about every pod; and where the time goes.

For each policy: wall and CPU seconds of one replay (loading the trace aside, timed on its
own), microseconds of CPU per pod, and the allocation at 100 % arrived. The paper's policies
run on the replay's node index, HAMi's node/GPU pairs (`binpack/spread`, ...) through vgpu's
scheduler (`Ledger.decide`). The baseline replays the same stream with the same policy objects
but scores every node that fits for every pod (the straightforward way; the paper's artifact
takes about 600 s per replay on 2 vCPU): it must give the same allocation. `--profile POLICY`
runs one more replay under cProfile and prints the functions that took the most time.

    .venv/bin/python bench/trace_replay.py                        # every policy, default, seed 42
    .venv/bin/python bench/trace_replay.py --workload gpushare100 --policies fgd --baseline fgd
    .venv/bin/python bench/trace_replay.py --policies fgd --profile fgd --baseline none
    .venv/bin/python bench/trace_replay.py --policies binpack/spread --profile binpack/spread
"""

import argparse
import cProfile
import io
import pstats
import time
from collections.abc import Sequence

from fixture import machine

from vgpu.app.simulate.engine import ALL_PAIRS, PolicyPair
from vgpu.app.simulate.trace.command import load
from vgpu.app.simulate.trace.replay import Replay, Trace, TracePolicy, policy_name, replay
from vgpu.domain.fragmentation import (
    MilliNode,
    MilliPod,
    PaperPolicy,
    RandomPlacement,
    Scored,
    fits,
    place,
)


class EveryNode:
    """The baseline search: every node that fits is scored for every pod."""

    def __init__(
        self, nodes: Sequence[MilliNode], ranks: Sequence[int], policy: Scored | RandomPlacement
    ) -> None:
        self.nodes = list(nodes)
        self._ranks = ranks
        self._policy = policy

    def choose(self, pod: MilliPod) -> int | None:
        feasible = [i for i, node in enumerate(self.nodes) if fits(node, pod)]
        if not feasible:
            return None
        policy = self._policy
        if isinstance(policy, RandomPlacement):
            return feasible[policy.node(len(feasible))]
        return min(feasible, key=lambda i: (-policy.score(self.nodes[i], pod), self._ranks[i]))

    def place(self, node: int, pod: MilliPod) -> tuple[int, ...]:
        cards = self._policy.cards(self.nodes[node], pod)
        self.nodes[node] = place(self.nodes[node], pod, cards)
        return cards


def line(label: str, result: Replay) -> str:
    per_pod = result.cpu_seconds / result.pods * 1e6
    at = result.allocation.get(100, float("nan"))
    return (
        f"{label:<28}{result.wall_seconds:>8.2f}{result.cpu_seconds:>8.2f}{per_pod:>12.0f}"
        f"{result.pods:>8,}{at:>10.2f}"
    )


def parse(name: str) -> TracePolicy:
    return PolicyPair.parse(name) if "/" in name else PaperPolicy(name)


def profile(trace: Trace, policy: TracePolicy, seed: int, top: int) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    replay(trace, policy, seed)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="default")
    parser.add_argument("--seed", type=int, default=42)
    every = [*(p.value for p in PaperPolicy), *(p.label for p in ALL_PAIRS)]
    parser.add_argument("--policies", default=",".join(every))
    parser.add_argument("--baseline", default="fgd", help="policy for the baseline, or none")
    parser.add_argument("--profile", default="", help="profile one replay of this policy")
    parser.add_argument("--top", type=int, default=14)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    wall, cpu = time.perf_counter(), time.process_time()
    trace = load(args.workload, None)
    print(
        f"loading the {args.workload} trace: {time.perf_counter() - wall:.2f} s wall, "
        f"{time.process_time() - cpu:.2f} s CPU; seed {args.seed}"
    )
    print(f"{'':<28}{'wall s':>8}{'CPU s':>8}{'CPU us/pod':>12}{'pods':>8}{'at 100 %':>10}")
    results: dict[TracePolicy, Replay] = {}
    for name in args.policies.split(","):
        policy = parse(name)
        results[policy] = replay(trace, policy, args.seed)
        how = "Ledger" if isinstance(policy, PolicyPair) else "index"
        print(line(f"{policy_name(policy)} ({how})", results[policy]))
    if args.baseline != "none":
        policy = PaperPolicy(args.baseline)
        baseline = replay(trace, policy, args.seed, EveryNode)
        print(line(f"{policy.value} (every node asked)", baseline))
        indexed = results.get(policy) or replay(trace, policy, args.seed)
        same = indexed.allocation == baseline.allocation and indexed.placed == baseline.placed
        print(f"same allocation curve and placements with and without the index: {same}")
    if args.profile:
        print(f"\nprofile of one {args.profile} replay (cProfile adds overhead), by own time:")
        print(profile(trace, parse(args.profile), args.seed, args.top))


if __name__ == "__main__":
    main()
