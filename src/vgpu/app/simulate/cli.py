"""`vgpu simulate`: run a workload through the scheduling rules on a simulated cluster."""

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vgpu.domain.errors import DomainError
from vgpu.domain.fragmentation import PaperPolicy, parse_paper_policy
from vgpu.domain.policy import Policy

from .dra import DraMode
from .engine import ALL_PAIRS, HAMI_DEFAULT, PolicyPair
from .outputs import plots_unavailable, save_report, with_progress
from .report import document, table
from .runner import run_pairs
from .scenario import ScenarioError, default_scenario_text, load_scenario
from .trace.command import SEEDS, run_trace
from .trace.files import WORKLOADS
from .trace.replay import TracePolicy

log = logging.getLogger(__name__)

MAX_JOBS = len(ALL_PAIRS)  # one process per policy pair; more would have nothing to run


def register(subparsers: Any) -> None:
    """Add the `simulate` sub-command."""
    parser = subparsers.add_parser(
        "simulate",
        help="run a day of GPU workload on a simulated cluster and compare scheduling policies",
        description="Run a workload through vgpu's admission, filter and ledger on a simulated "
        "cluster (no Kubernetes, no GPU) and compare node/GPU policies side by side. Without "
        "--scenario an embedded default is used (see docs/simulate.md).",
    )
    parser.add_argument("--scenario", type=Path, metavar="FILE", help="scenario YAML file")
    parser.add_argument(
        "--trace",
        metavar="WORKLOAD|FILE",
        help="replay a GPU-sharing trace instead, under the FGD paper's protocol: a shipped "
        f"openb workload ({', '.join(WORKLOADS)}) or a pod CSV with its columns",
    )
    parser.add_argument(
        "--nodes",
        type=Path,
        metavar="FILE",
        help="with --trace: the cluster, a node CSV (default: the openb trace's 1213 GPU nodes)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        help="random seed (default: the scenario's seed; with --trace, the first seed: 42)",
    )
    parser.add_argument(
        "--seeds",
        type=_whole(1),
        help=f"with --trace: how many seeds, from --seed on (default {SEEDS}, as the paper)",
    )
    parser.add_argument(
        "--policy",
        type=_policies,
        metavar="LIST",
        help="run only these, comma-separated: NODE/GPU pairs such as binpack/spread (default: "
        "all four); with --trace the replay's policies (the paper's and vgpu's) "
        f"({', '.join(p.value for p in PaperPolicy)}) and HAMi's pairs of binpack and spread "
        "(default: all)",
    )
    parser.add_argument(
        "--preemption",
        action="store_true",
        help="a pod that fits nowhere evicts lower-priority pods to fit, as kube-scheduler's "
        "preemption with vgpu's /preempt does (default: the scenario's preemption option)",
    )
    parser.add_argument(
        "--dra",
        action="store_true",
        help="also run the pods as DRA ResourceClaims on vgpu's shared DRA devices, allocated by "
        "kube-scheduler's allocator, and compare (default then: HAMi's default pair and DRA)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument(
        "--report", type=Path, metavar="DIR", help="write PNG plots, results.json and index.html"
    )
    parser.add_argument(
        "--jobs",
        type=_whole(1, MAX_JOBS),
        default=1,
        help=f"runs in parallel processes, at most {MAX_JOBS} (default 1: the default "
        "scenario's runs take about half a second each, hardly more than starting a worker "
        "process costs)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument(
        "--print-scenario",
        action="store_true",
        help="print the scenario YAML (the embedded default without --scenario) and exit",
    )
    parser.add_argument(
        "--print-typical-shapes",
        action="store_true",
        help="with --trace: print the trace's typical pod shapes as the Helm chart's "
        "scheduler.fragmentation.typicalShapes value (what the live fgd weighs) and exit",
    )
    parser.set_defaults(run=run)


POLICY_FORMS = (
    f"give NODE/GPU pairs of {', '.join(p.value for p in Policy)} such as binpack/spread; with "
    f"--trace, the replay's policies ({', '.join(p.value for p in PaperPolicy)}) and HAMi's pairs "
    f"({', '.join(pair.label for pair in ALL_PAIRS)})"
)


def _policies(text: str) -> list[PolicyPair | PaperPolicy]:
    """Pairs (`binpack/spread`) and the paper's policy names, in the order given, each once."""
    chosen: list[PolicyPair | PaperPolicy] = []
    for item in (part.strip() for part in text.split(",")):
        try:
            policy = PolicyPair.parse(item) if "/" in item else parse_paper_policy(item)
        except DomainError:  # a word that is not one of the paper's policies
            raise argparse.ArgumentTypeError(f"{item!r} is not a policy: {POLICY_FORMS}") from None
        except ValueError as exc:  # a pair with an unknown half: the message names it
            raise argparse.ArgumentTypeError(str(exc)) from None
        if policy not in chosen:
            chosen.append(policy)
    return chosen


def _whole(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high` (no upper bound when None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            bounds = f"at least {low}" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"{text!r} must be {bounds}")
        return value

    return parse


def run(args: argparse.Namespace) -> int:
    """Load the scenario, run it under the chosen pairs, print the table or JSON."""
    pairs = [p for p in args.policy or () if isinstance(p, PolicyPair)]
    named = [p for p in args.policy or () if isinstance(p, PaperPolicy)]
    if args.report is not None and plots_unavailable():
        return 2
    if args.trace is not None:
        if clash := _trace_clash(args, pairs):
            print(f"vgpu simulate: {clash}", file=sys.stderr)
            return 2
        chosen: list[TracePolicy] = list(args.policy or ())
        if args.dra:
            chosen = [*(chosen or [HAMI_DEFAULT]), DraMode.KUBE_SCHEDULER]
        return run_trace(args, chosen)
    trace_only = args.nodes is not None or args.seeds is not None or args.print_typical_shapes
    if named or trace_only:
        given = f"--policy {named[0].value}" if named else "--nodes" if args.nodes else "--seeds"
        given = "--print-typical-shapes" if args.print_typical_shapes else given
        print(f"vgpu simulate: {given} applies to a trace replay (--trace)", file=sys.stderr)
        return 2
    if args.print_scenario:
        return _print_scenario(args.scenario)
    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as exc:
        print(f"vgpu simulate: invalid scenario:\n{exc}", file=sys.stderr)
        return 2
    if args.preemption:
        scenario = scenario.model_copy(update={"preemption": True})
    if args.dra and scenario.preemption:
        print(
            "vgpu simulate: --dra does not model preemption (kube-scheduler's own, with claims)",
            file=sys.stderr,
        )
        return 2
    seed = scenario.seed if args.seed is None else args.seed
    runs: list[PolicyPair | DraMode] = list(pairs or ([HAMI_DEFAULT] if args.dra else ALL_PAIRS))
    if args.dra:
        runs.append(DraMode.KUBE_SCHEDULER)
    started = time.perf_counter()
    results = with_progress(
        f"simulating {len(runs)} run{'s' if len(runs) > 1 else ''}",
        not args.no_progress,
        lambda update: run_pairs(scenario, runs, seed, jobs=args.jobs, progress=update),
    )
    if results is None:
        return 130
    log.info("simulated %d runs in %.1f s", len(results), time.perf_counter() - started)
    if args.json:
        print(json.dumps(document(scenario, seed, results), indent=2))
    else:
        print(table(scenario, seed, results), end="")
    if args.report is not None:
        from .plots import write_report  # matplotlib loads only when asked for

        return save_report(args.report, lambda d: write_report(d, scenario, seed, results))
    return 0


def _trace_clash(args: argparse.Namespace, pairs: list[PolicyPair]) -> str:
    """Why these options cannot go with --trace ('' when they can)."""
    for given, option in (
        (args.scenario, "--scenario"),
        (args.preemption, "--preemption"),
        (args.print_scenario, "--print-scenario"),
    ):
        if given:
            return f"{option} does not apply to a trace replay (--trace)"
    for pair in pairs:
        if pair not in ALL_PAIRS:
            return (
                f"--policy {pair.label}: a trace replays HAMi's pairs of binpack and spread; "
                "FGD is the paper's policy fgd"
            )
    return ""


def _print_scenario(path: Path | None) -> int:
    if path is None:
        print(default_scenario_text(), end="")
        return 0
    try:
        print(path.read_text(encoding="utf-8"), end="")
    except OSError as exc:
        print(f"vgpu simulate: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0
