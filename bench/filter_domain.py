"""Filter decision latency of vgpu's domain against HAMi's way of computing the same decision.

For each cluster size it builds the same cluster twice: vgpu's state (a Ledger kept
incrementally, plus a QuotaBook) and HAMi's (a pod cache of decoded grants, usage rebuilt from
every pod on each call; see bench/hami_baseline.py). Then it answers the same filter calls three
ways, interleaved: vgpu before the index (`decide` over every node's view), vgpu indexed
(`Ledger.decide`) and HAMi-style; checks that all three pick the same node and cards, and prints
the latency (median, p99), the throughput, HAMi's published Go figures, the time for a pod that
fits nowhere, and the memory the scheduler state takes (tracemalloc).

One filter call = decide among every node of the cluster + record the grant (vgpu: Ledger.grant
and QuotaBook.charge; HAMi: addPod). Parsing the pod is the same for all and not timed.

    .venv/bin/python bench/filter_domain.py            # four sizes, 50 to 5,000 nodes
    .venv/bin/python bench/filter_domain.py --quick    # two small sizes, a few seconds
"""

import argparse
import gc
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fixture import (
    FULL,
    NAMESPACES,
    QUICK,
    RESULTS,
    Cluster,
    Size,
    build_cluster,
    incoming_plans,
    machine,
    quota_limits,
    stats_ms,
    write_json,
)
from hami_baseline import HamiStyleScheduler

from vgpu.domain import (
    NVIDIA,
    Budget,
    Decision,
    Ledger,
    NoPlacement,
    Placement,
    PodPlan,
    QuotaBook,
    SchedulingConfig,
    decide,
    decode_node_devices,
    decode_pod_grants,
    encode_node_devices,
    limits_from_hard,
    plan_pod,
    pod_from_manifest,
)

# HAMi's Go scheduler, per filter call (Project-HAMi/HAMi issue #3021)
HAMI_GO_MS = {(50, 8, 1_000): 4.16, (100, 16, 5_000): 17.9}
MIB = 1024 * 1024


def build_vgpu_state(cluster: Cluster, size: Size) -> tuple[Ledger, QuotaBook]:
    """The scheduler's state as production builds it: from the annotations it watches."""
    ledger = Ledger()
    for node, cards in cluster.devices.items():
        ledger.set_node(node, decode_node_devices(encode_node_devices(cards)))
    quota = QuotaBook()
    for namespace in NAMESPACES:
        quota.set_limits(namespace, limits_from_hard(quota_limits(size), NVIDIA))
    for pod in cluster.running:
        grants = decode_pod_grants(pod.annotation)
        ledger.grant(pod.key, pod.node, grants)
        quota.charge(pod.key, pod.namespace, grants, 0)
    ledger.settle()  # as the scheduler does once its rebuild is done
    return ledger, quota


def build_hami_state(cluster: Cluster) -> HamiStyleScheduler:
    devices = {n: decode_node_devices(encode_node_devices(c)) for n, c in cluster.devices.items()}
    hami = HamiStyleScheduler(devices)
    for pod in cluster.running:
        hami.add_pod(pod.key, pod.node, pod.annotation)
    return hami


def traced(build: Any) -> tuple[Any, float, float]:
    """Run `build()` under tracemalloc: (result, MiB kept, MiB at the peak)."""
    tracemalloc.start()
    try:
        result = build()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, current / MIB, peak / MIB


def same(a: Decision, b: Decision) -> bool:
    if isinstance(a, Placement) and isinstance(b, Placement):
        return a.node == b.node and a.grants == b.grants
    if isinstance(a, NoPlacement) and isinstance(b, NoPlacement):
        return a.rejections == b.rejections
    return False


class Timings:
    """Wall and CPU seconds of each call of one contender."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def call(self, work: Callable[[], Decision], keep: bool) -> Decision:
        start, start_cpu = time.perf_counter(), time.thread_time()
        decision = work()
        end, end_cpu = time.perf_counter(), time.thread_time()
        if keep:
            self.wall.append(end - start)
            self.cpu.append(end_cpu - start_cpu)
        return decision

    def stats(self) -> dict[str, float]:
        figures = stats_ms(self.wall)
        figures["cpu_median_ms"] = stats_ms(self.cpu)["median_ms"]
        return figures


def no_fit_plan() -> PodPlan:
    """A pod that fits nowhere in the benchmark clusters: eight whole cards, exclusively."""
    limits = {"nvidia.com/gpu": "8", "nvidia.com/gpucores": "100"}
    manifest = {
        "metadata": {"name": "whole-node", "namespace": NAMESPACES[0]},
        "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]},
    }
    plan = plan_pod(pod_from_manifest(manifest), SchedulingConfig())
    assert plan is not None
    return plan


def measure(size: Size, calls: int) -> dict[str, Any]:
    cluster = build_cluster(size)
    (ledger, quota), vgpu_mib, vgpu_peak = traced(lambda: build_vgpu_state(cluster, size))
    hami, hami_mib, hami_peak = traced(lambda: build_hami_state(cluster))
    decode_seconds = min(_decode_all(cluster) for _ in range(3))
    gc.collect()
    gc.freeze()  # as the scheduler does once synced: collections skip the state built so far

    nodes = ledger.nodes()
    views_seconds = _median_of(5, lambda: [ledger.view(n) for n in nodes])
    rebuild_seconds = _median_of(5, hami.usage)
    before, indexed, baseline = Timings(), Timings(), Timings()
    placed = mismatches = 0
    warmup = 2
    for i, plan in enumerate(incoming_plans(calls + warmup)):
        budget = quota.budget(plan.namespace)
        keep = i >= warmup

        def record(decision: Decision, plan: PodPlan = plan) -> Decision:
            if isinstance(decision, Placement):
                ledger.grant(plan.key, decision.node, decision.grants, plan.init_count)
                quota.charge(plan.key, plan.namespace, decision.grants, plan.init_count)
            return decision

        def undo(plan: PodPlan = plan) -> None:  # every call sees the cluster as built (untimed)
            ledger.release(plan.key)
            quota.refund(plan.key)
            hami.remove_pod(plan.key)

        exhaustive = before.call(
            lambda p=plan, b=budget: record(decide(p, [ledger.view(n) for n in nodes], b)), keep
        )
        undo()
        fast = indexed.call(lambda p=plan, b=budget: record(ledger.decide(p, nodes, b)), keep)
        undo()
        theirs = baseline.call(lambda p=plan, b=budget: _hami_filter(hami, p, nodes, b), keep)
        undo()
        if keep:
            placed += isinstance(fast, Placement)
            mismatches += not (same(fast, exhaustive) and same(exhaustive, theirs))
    refused = no_fit_plan()
    budget = quota.budget(refused.namespace)
    cpu = time.thread_time  # CPU time: these are single calls, easily hit by a busy machine
    no_fit = {
        "decide": _median_of(
            3, lambda: decide(refused, [ledger.view(n) for n in nodes], budget), cpu
        ),
        "indexed_first": _median_of(1, lambda: ledger.decide(refused, nodes, budget), cpu),
        "indexed_again": _median_of(5, lambda: ledger.decide(refused, nodes, budget), cpu),
    }
    no_fit = {label: seconds * 1e3 for label, seconds in no_fit.items()}
    mismatches += not isinstance(ledger.decide(refused, nodes, budget), NoPlacement)
    vgpu, fast_stats, hami_stats = before.stats(), indexed.stats(), baseline.stats()
    return {
        "nodes": size.nodes,
        "gpus_per_node": size.gpus,
        "running_pods": size.pods,
        "filter_calls": calls,
        "placed": placed,
        "decisions_differing": mismatches,
        "vgpu": vgpu,
        "vgpu_indexed": fast_stats,
        "hami_style_python": hami_stats,
        "ratio_median": hami_stats["median_ms"] / vgpu["median_ms"],
        "ratio_cpu_median": hami_stats["cpu_median_ms"] / vgpu["cpu_median_ms"],
        "indexed_speedup_median": vgpu["median_ms"] / fast_stats["median_ms"],
        "no_fit_ms": no_fit,
        "hami_go_ms": HAMI_GO_MS.get((size.nodes, size.gpus, size.pods)),
        "decode_all_grants_ms": decode_seconds * 1e3,
        "state_work_ms": {
            "vgpu_node_views": views_seconds * 1e3,
            "hami_style_rebuild": rebuild_seconds * 1e3,
        },
        "state_mib": {
            "vgpu": vgpu_mib,
            "vgpu_peak": vgpu_peak,
            "hami_style": hami_mib,
            "hami_style_peak": hami_peak,
        },
    }


def _hami_filter(
    hami: HamiStyleScheduler, plan: PodPlan, nodes: list[str], budget: Budget
) -> Decision:
    decision = hami.filter(plan, nodes, budget)
    if isinstance(decision, Placement):
        hami.add_decoded(plan.key, decision.node, decision.grants)
    return decision


def _median_of(
    times: int, work: Callable[[], object], clock: Callable[[], float] = time.perf_counter
) -> float:
    """Median time of `work()` over `times` runs (wall time unless another clock is given)."""
    spent = []
    for _ in range(times):
        start = clock()
        work()
        spent.append(clock() - start)
    return sorted(spent)[times // 2]


def _decode_all(cluster: Cluster) -> float:
    start = time.perf_counter()
    for pod in cluster.running:
        decode_pod_grants(pod.annotation)
    return time.perf_counter() - start


LATENCY = (
    ("cluster", lambda r: f"{r['nodes']:,} x {r['gpus_per_node']}, {r['running_pods']:,} pods"),
    ("calls", lambda r: str(r["filter_calls"])),
    ("before: decide median ms", lambda r: f"{r['vgpu']['median_ms']:.2f}"),
    ("before p99 ms", lambda r: f"{r['vgpu']['p99_ms']:.2f}"),
    ("indexed median ms", lambda r: f"{r['vgpu_indexed']['median_ms']:.3f}"),
    ("indexed p99 ms", lambda r: f"{r['vgpu_indexed']['p99_ms']:.3f}"),
    ("indexed CPU ms", lambda r: f"{r['vgpu_indexed']['cpu_median_ms']:.3f}"),
    ("indexed calls/s", lambda r: f"{r['vgpu_indexed']['per_second']:,.0f}"),
    ("HAMi-style median ms", lambda r: f"{r['hami_style_python']['median_ms']:.2f}"),
    ("HAMi-style p99 ms", lambda r: f"{r['hami_style_python']['p99_ms']:.2f}"),
    ("HAMi-style CPU ms", lambda r: f"{r['hami_style_python']['cpu_median_ms']:.2f}"),
    (
        "HAMi-style / indexed",
        lambda r: f"{r['hami_style_python']['median_ms'] / r['vgpu_indexed']['median_ms']:.0f}x",
    ),
    ("HAMi Go ms", lambda r: "-" if r["hami_go_ms"] is None else f"{r['hami_go_ms']}"),
)
NO_FIT = (
    ("cluster", LATENCY[0][1]),
    ("before: decide CPU ms", lambda r: f"{r['no_fit_ms']['decide']:.2f}"),
    ("indexed, first CPU ms", lambda r: f"{r['no_fit_ms']['indexed_first']:.2f}"),
    ("indexed, retried CPU ms", lambda r: f"{r['no_fit_ms']['indexed_again']:.2f}"),
)
STATE = (
    ("cluster", LATENCY[0][1]),
    ("vgpu node views ms", lambda r: f"{r['state_work_ms']['vgpu_node_views']:.2f}"),
    ("HAMi-style rebuild ms", lambda r: f"{r['state_work_ms']['hami_style_rebuild']:.2f}"),
    ("vgpu state MiB", lambda r: f"{r['state_mib']['vgpu']:.1f}"),
    ("vgpu build peak MiB", lambda r: f"{r['state_mib']['vgpu_peak']:.1f}"),
    ("HAMi-style state MiB", lambda r: f"{r['state_mib']['hami_style']:.1f}"),
    ("decode every grant ms", lambda r: f"{r['decode_all_grants_ms']:.1f}"),
)
Column = tuple[str, Callable[[dict[str, Any]], str]]


def table(rows: Sequence[dict[str, Any]], columns: Sequence[Column]) -> str:
    """A Markdown table (readable as plain text too)."""
    cells = [[cell(r) for _, cell in columns] for r in rows]
    heads = [name for name, _ in columns]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    for row in cells:
        lines.append(
            "| "
            + " | ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
            + " |"
        )
    return "\n".join(lines)


def output_file(given: Path | None, quick: bool) -> Path:
    """`--out`, or the default under the ignored out/bench/ (bench/results/ holds the committed
    figures docs/benchmarks.md cites, which a run must not overwrite)."""
    return given or RESULTS / ("filter_domain-quick.json" if quick else "filter_domain.json")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="two small sizes only")
    parser.add_argument("--calls", type=int, help="filter calls per size (default: per size)")
    parser.add_argument(
        "--out", type=Path, help="JSON file (default: out/bench/filter_domain[-quick].json)"
    )
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    out = output_file(args.out, args.quick)
    info = machine()
    print(
        f"machine: {info['cpus']} CPUs ({info['cpu_model']}), "
        f"{info['implementation']} {info['python']}, {info['system']}",
        file=sys.stderr,
    )
    rows = []
    started = time.perf_counter()
    for size in sizes:
        calls = args.calls or size.calls
        print(f"measuring {size.label} ({calls} filter calls)...", file=sys.stderr)
        row = measure(size, calls)
        gc.unfreeze()  # let this size's state go before the next is built
        rows.append(row)
        if row["decisions_differing"]:
            print(
                f"  {row['decisions_differing']} decisions differ between vgpu and the baseline",
                file=sys.stderr,
            )
    print(table(rows, LATENCY))
    print(
        "\nOne call: choose a node among all, then record the grant. before: fit and score every "
        "node\n(`decide`). indexed: `Ledger.decide`, the same answer from the ledger's index. "
        "HAMi-style: `decide`\nafter rebuilding usage from every pod (HAMi's getNodesUsage), in "
        "Python. CPU ms: median CPU\ntime of the call. HAMi Go: HAMi's own scheduler per filter "
        "call, HAMi issue #3021.\n"
    )
    print(table(rows, NO_FIT))
    print(
        "\nA pod that fits nowhere (8 whole cards, exclusive): every node's rejection, median CPU "
        "time. first:\nthe first call for this pod. retried: the same pod again, the cluster "
        "unchanged, as kube-scheduler\nretries it (rejections are remembered per node until the "
        "node changes).\n"
    )
    print(table(rows, STATE))
    print(
        "\nThe state part of one call: vgpu reads the ledger's node views; HAMi-style rebuilds "
        "every\ncard's usage from every pod. state MiB: what the scheduler keeps (vgpu: Ledger + "
        "QuotaBook;\nHAMi-style: node cards + pod cache), by tracemalloc after building it from "
        "the annotations.\ndecode every grant: what re-reading every pod's annotation on each "
        "call would add."
    )
    write_json(
        out,
        {
            "benchmark": "filter_domain",
            "machine": info,
            "seconds": time.perf_counter() - started,
            "sizes": rows,
        },
    )
    print(f"\nnumbers written to {out}", file=sys.stderr)
    return 1 if any(r["decisions_differing"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
