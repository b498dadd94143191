"""`vgpu simulate --dra`'s cost on the openb trace: one replay with claims allocated by the
domain's port of kube-scheduler's allocator, beside one replay of the same stream through
vgpu's scheduler with HAMi's default pair (the device-plugin mode), in the same process.

Prints wall and CPU seconds of each, microseconds of CPU per pod, the allocation at 100 %
arrived and failed pods, and the ratio of DRA's CPU time to the device-plugin mode's (the
budget is 2). `--profile` runs one more DRA replay under cProfile.

    .venv/bin/python bench/simulate_dra.py
    .venv/bin/python bench/simulate_dra.py --workload gpushare100 --seeds 42,43
    .venv/bin/python bench/simulate_dra.py --profile
"""

import argparse
import cProfile
import io
import pstats
import time

from fixture import machine

from vgpu.app.simulate.dra import DraMode
from vgpu.app.simulate.engine import HAMI_DEFAULT
from vgpu.app.simulate.trace.command import load
from vgpu.app.simulate.trace.replay import Replay, TracePolicy, policy_name, replay


def line(label: str, result: Replay) -> str:
    per_pod = result.cpu_seconds / result.pods * 1e6
    at = result.allocation.get(100, float("nan"))
    return (
        f"{label:<34}{result.wall_seconds:>8.2f}{result.cpu_seconds:>8.2f}{per_pod:>12.0f}"
        f"{at:>10.2f}{result.failed:>8,}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="default")
    parser.add_argument("--seeds", default="42", help="comma-separated")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    wall, cpu = time.perf_counter(), time.process_time()
    trace = load(args.workload, None)
    print(
        f"loading the {args.workload} trace: {time.perf_counter() - wall:.2f} s wall, "
        f"{time.process_time() - cpu:.2f} s CPU"
    )
    print(f"{'':<34}{'wall s':>8}{'CPU s':>8}{'CPU us/pod':>12}{'at 100 %':>10}{'failed':>8}")
    policies: tuple[TracePolicy, ...] = (HAMI_DEFAULT, DraMode.KUBE_SCHEDULER)
    for seed in (int(s) for s in args.seeds.split(",")):
        results = {p: replay(trace, p, seed) for p in policies}
        for policy, result in results.items():
            how = "claims, allocator" if isinstance(policy, DraMode) else "Ledger"
            print(line(f"{policy_name(policy)} ({how}) seed {seed}", result))
        ratio = results[DraMode.KUBE_SCHEDULER].cpu_seconds / results[HAMI_DEFAULT].cpu_seconds
        print(f"seed {seed}: DRA / device-plugin mode CPU time = {ratio:.2f} (budget 2)")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        replay(trace, DraMode.KUBE_SCHEDULER, 42)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime").print_stats(14)
        print(out.getvalue())


if __name__ == "__main__":
    main()
