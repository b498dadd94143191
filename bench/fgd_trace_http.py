"""FGD over HTTP on a trace's mixed pod shapes: a real `vgpu scheduler --fake-cluster` process,
kube-scheduler's `/filter` and `/bind` for every pod, the default policy (HAMi's binpack/spread),
`fgd` and `fgd-balanced` side by side in the same run. Prints each policy's `/filter` latency
per GPU pod (p50, mean, p99), the scheduler's CPU time per pod (steadier than latency on a
shared machine), the GPU allocated when 100 % of it has arrived, and, for `fgd` and
`fgd-balanced`, how many pods went where the replay's same policy puts them; asserts nothing.
The load average before and after shows how busy the machine was.

    .venv/bin/python bench/fgd_trace_http.py [--cluster openb|uniform] [--pods N] [--every K]
                                             [--policies default,fgd,fgd-balanced] [--seed 42]

`--cluster openb` (default): the 1,213 nodes of Alibaba's openb trace, with their CPU and
memory, and the `default` workload's stream under the FGD paper's protocol (seed 42) until
100 % of the GPU has arrived: 8,349 pods, 1,110 of them CPU-only (placed as kube-scheduler
would: where the replay's FGD puts them while the run follows the replay; `/filter` and `/bind`
still create and bind them, so the scheduler counts their CPU). `--every K` keeps every K-th of
those nodes (in the trace's order, as `tests/e2e/scheduler/test_fgd_trace.py` keeps a tenth)
and sends the stream until 100 % of their GPU has arrived: a shorter run.

`--cluster uniform`: 1000 nodes x 8 cards (16 GiB, split 20) with 128 CPUs each and 20k pods
already running (20 per node on its first 4 cards, a 5 % share and one CPU each), then
`--pods` GPU pods drawn (seeded) from the openb trace's GPU pods, each filtered and bound.

Both run `fgd` and `fgd-balanced` with the openb trace's typical shapes
(`fragmentation.typical_shapes_file`).
To see where a scheduler's time goes, attach a sampling profiler to it while it runs
(`py-spy record --pid PID`; the schedulers are this script's child processes).
"""

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.scheduler.harness import SchedulerProcess, wait_until
from tests.e2e.scheduler.trace_driver import (
    Extender,
    Outcome,
    Running,
    after_running,
    cluster_file,
    drive,
    granted_cards,
    start_env,
    until_arrived,
)
from vgpu.app.simulate.trace.files import (
    read_nodes,
    read_pods,
    shipped_nodes,
    shipped_pods,
)
from vgpu.app.simulate.trace.index import NodeIndex
from vgpu.app.simulate.trace.protocol import arrivals, node_ranks
from vgpu.app.simulate.trace.replay import Trace, replay
from vgpu.domain.fragmentation import MILLI, MilliNode, MilliPod, PaperPolicy, placement_policy

UNIFORM_NODES, UNIFORM_CARDS, RUNNING_PER_NODE = 1000, 8, 20
REPLAYED = ("fgd", "fgd-balanced")  # the live policies the replay has too
HELD_CARDS = 4  # the running pods share the first 4 cards: the others stay whole


def cpu_seconds(pid: int) -> float:
    """CPU time the process has used (Linux /proc: user + system), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def openb(
    trace: Trace, seed: int, every: int
) -> tuple[list[MilliNode], list[Running], list[MilliPod]]:
    nodes = trace.nodes[::every]
    cards = sum(len(n.free) for n in nodes)
    rng = random.Random(seed)
    stream = until_arrived(arrivals(trace.pods, cards * MILLI, rng), cards, 100)
    ranks = node_ranks(len(nodes), rng)
    ordered = [n for _, n in sorted(zip(ranks, nodes, strict=True), key=lambda x: x[0])]
    return ordered, [], stream


def uniform(
    trace: Trace, seed: int, pods: int
) -> tuple[list[MilliNode], list[Running], list[MilliPod]]:
    node = MilliNode("L4", 128_000, 524_288, (MILLI,) * UNIFORM_CARDS)
    running = [
        Running(f"run-{n}-{k}", n, (k % HELD_CARDS,), MilliPod(1000, 1024, 1, 50))
        for n in range(UNIFORM_NODES)
        for k in range(RUNNING_PER_NODE)
    ]
    gpu_pods = [p for p in trace.pods if p.gpus]
    rng = random.Random(seed)
    return [node] * UNIFORM_NODES, running, [rng.choice(gpu_pods) for _ in range(pods)]


def run(
    policy: str,
    nodes: list[MilliNode],
    running: list[Running],
    stream: list[MilliPod],
    trace: Trace,
    directory: Path,
) -> tuple[Outcome, float, int | None]:
    """One scheduler under `policy`; the outcome, its CPU seconds per pod, and (fgd,
    fgd-balanced) how many pods' cards differ from the replay's (None: not compared)."""
    path = cluster_file(directory / f"cluster-{policy}.json", nodes, running)
    shapes = Path(str(shipped_pods("default"))) if policy in REPLAYED else None
    process = SchedulerProcess(
        directory, ["--fake-cluster", str(path)], start_env(policy, shapes), name=policy
    )
    process.start(ready=False)
    start = after_running(nodes, running)
    oracle = None
    if policy in REPLAYED:
        rules = placement_policy(PaperPolicy(policy), trace.workload, random.Random(0), start)
        oracle = NodeIndex(start, range(len(start)), rules)
    extender = Extender(process.extender_port)
    try:
        if not wait_until(process.ready, 600):  # 20k pods to read on a busy machine: minutes
            raise SystemExit(f"the scheduler did not become ready:\n{process.logs()}")
        print(f"  {policy}: scheduler pid {process.pid}", file=sys.stderr)
        before = cpu_seconds(process.pid)
        outcome = drive(extender, start, stream, oracle)
        cpu = (cpu_seconds(process.pid) - before) / len(stream)
        differ = None
        if oracle is not None:
            live = granted_cards(process.scrape.get("/metrics").text)
            expected = outcome.expected_cards.items()
            differ = sum(1 for pod, cards in expected if live.get(pod) != cards)
    finally:
        extender.close()
        process.close()
    return outcome, cpu, differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", choices=("openb", "uniform"), default="openb")
    parser.add_argument("--pods", type=int, default=2000, help="GPU pods sent (uniform cluster)")
    parser.add_argument("--every", type=int, default=1, help="every K-th openb node (openb)")
    parser.add_argument("--policies", default="default,fgd,fgd-balanced")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    trace = Trace.of("default", read_nodes(shipped_nodes()), read_pods(shipped_pods("default")))
    if args.cluster == "openb":
        nodes, running, stream = openb(trace, args.seed, args.every)
    else:
        nodes, running, stream = uniform(trace, args.seed, args.pods)
    gpu = sum(1 for p in stream if p.gpus)
    print(
        f"{args.cluster}: {len(nodes)} nodes, {len(running)} pods running, {len(stream)} pods "
        f"sent ({gpu} GPU pods), /filter latency per GPU pod over HTTP; "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start"
    )
    print(
        f"{'policy':>12} {'p50 ms':>8} {'mean ms':>8} {'p99 ms':>8} {'max ms':>8} "
        f"{'CPU ms/pod':>11} {'alloc@100%':>11} {'failed':>7} {'as replay':>10} {'wall s':>7}"
    )
    means: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as directory:
        for policy in args.policies.split(","):
            started = time.perf_counter()
            outcome, cpu, differ = run(policy, nodes, running, stream, trace, Path(directory))
            wall = time.perf_counter() - started
            lat = sorted(outcome.latencies)
            means[policy] = statistics.fmean(lat)
            same = "-"
            if policy in REPLAYED:
                followed = outcome.compared if outcome.diverged is None else outcome.diverged
                same = f"{followed}/{len(stream)}" + (f" ({differ} cards)" if differ else "")
            print(
                f"{policy:>12} {statistics.median(lat) * 1000:>8.2f} {means[policy] * 1000:>8.2f} "
                f"{lat[max(0, round(len(lat) * 0.99) - 1)] * 1000:>8.2f} {lat[-1] * 1000:>8.2f} "
                f"{cpu * 1000:>11.2f} {outcome.allocation.get(100, float('nan')):>11.2f} "
                f"{sum(1 for n in outcome.nodes if n is None):>7} {same:>10} {wall:>7.1f}"
            )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    pairs = (("fgd", "default"), ("fgd-balanced", "default"), ("fgd-balanced", "fgd"))
    for policy, baseline in pairs:
        if policy in means and baseline in means:
            print(f"{policy} mean / {baseline} mean: {means[policy] / means[baseline]:.2f}")
    if args.cluster == "openb" and args.every == 1:
        for policy in (p for p in REPLAYED if p in means):
            wanted = replay(trace, PaperPolicy(policy), args.seed).allocation[100]
            print(
                f"the replay's {policy} at 100 % (vgpu simulate --trace default --seed "
                f"{args.seed}): {wanted:.2f}"
            )


if __name__ == "__main__":
    main()
