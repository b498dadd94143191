"""`vgpu simulate --trace`: load the trace, replay it under each policy and seed, print."""

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from vgpu.domain.fragmentation import PaperPolicy

from ..engine import ALL_PAIRS
from ..outputs import save_report, with_progress
from .experiments import run_policies
from .files import (
    WORKLOADS,
    TraceError,
    read_nodes,
    read_pods,
    shipped_nodes,
    shipped_pods,
)
from .hami import hami_shape
from .replay import Trace, TracePolicy
from .report import document, table

FIRST_SEED = 42  # the paper's seeds are 42..51
SEEDS = 10


def run_trace(args: argparse.Namespace, policies: Sequence[TracePolicy]) -> int:
    """Replay `args.trace` under `policies` (when empty: all of the paper's, then HAMi's
    four pairs)."""
    try:
        trace = load(args.trace, args.nodes)
    except TraceError as exc:
        print(f"vgpu simulate: invalid trace:\n{exc}", file=sys.stderr)
        return 2
    if args.print_typical_shapes:
        print(chart_shapes(trace), end="")
        return 0
    first = FIRST_SEED if args.seed is None else args.seed
    seeds = list(range(first, first + (args.seeds or SEEDS)))
    chosen = list(policies) or [*PaperPolicy, *ALL_PAIRS]
    runs = with_progress(
        f"replaying {trace.name}: {len(chosen) * len(seeds)} runs",
        not args.no_progress,
        lambda update: run_policies(trace, chosen, seeds, jobs=args.jobs, progress=update),
    )
    if runs is None:
        return 130
    if args.json:
        print(json.dumps(document(trace, runs), indent=2))
    else:
        print(table(trace, runs), end="")
    if args.report is not None:
        from .plots import write_report  # matplotlib loads only when asked for

        return save_report(args.report, lambda d: write_report(d, trace, runs))
    return 0


def chart_shapes(trace: Trace) -> str:
    """The trace's typical shapes as the chart's `scheduler.fragmentation.typicalShapes`.

    >>> from vgpu.domain.fragmentation import MilliPod
    >>> from .files import TracePod
    >>> shares = [TracePod("a", MilliPod(4000, 0, 1, 460))]
    >>> print(chart_shapes(Trace.of("t", [], shares)), end="")  # doctest: +ELLIPSIS
    # the typical pod shapes of t (...
    typicalShapes:
      - {gpus: 1, memoryPercent: 46, cores: 46, cpu: 4000m, hostMemory: 0Mi, weight: 1}
    """
    lines = [
        f"# the typical pod shapes of {trace.name} (the commonest covering 95 % of its pods), "
        "for the chart's scheduler.fragmentation",
        "typicalShapes:",
    ]
    for shape in trace.workload.shapes:
        item = hami_shape(shape)
        fields = [
            f"gpus: {item['gpus']}",
            f"memoryPercent: {item['memory_percent']}",
            f"cores: {item['cores']}",
            f"cpu: {item['cpu']}",
            f"hostMemory: {item['host_memory']}",
        ]
        if "gputype" in item:
            fields.append(f"gputype: {item['gputype']!r}")
        lines.append(f"  - {{{', '.join(fields)}, weight: {item['weight']}}}")
    return "\n".join(lines) + "\n"


def load(pods: str, nodes: Path | None) -> Trace:
    """A shipped workload by name, or a pod CSV; on the given node CSV or the openb nodes."""
    source = shipped_pods(pods) if pods in WORKLOADS else Path(pods)
    name = pods if pods in WORKLOADS else source.name
    if nodes is not None:
        name = f"{name} on {nodes.name}"  # not the paper's cluster: no published figures
    cluster = read_nodes(shipped_nodes() if nodes is None else nodes)
    return Trace.of(name, cluster, read_pods(source))
