"""A trace replay's results: the table `vgpu simulate --trace` prints and its JSON document."""

import textwrap
from collections import Counter
from collections.abc import Sequence
from typing import Any

from vgpu.domain.fragmentation import PaperPolicy

from ..dra import DraMode
from ..engine import HAMI_DEFAULT, PolicyPair
from .experiments import PolicyRuns, Spread
from .hami import CARD_MEMORY
from .paper import PUBLISHED, Published
from .protocol import LOAD
from .replay import Trace, TracePolicy, policy_name

MARKS = (100, round(LOAD * 100))  # the arrived percentages the table shows


def describe(trace: Trace) -> str:
    """`8,152 pods on 1,213 nodes (6,212 GPUs: G2 4,392 x 20000 MiB, ...; 107,018 CPUs)`."""
    models = Counter[str]()
    for node in trace.nodes:
        models[node.model] += len(node.free)
    cards = ", ".join(
        f"{model} {n:,}" + (f" x {CARD_MEMORY[model]} MiB" if model in CARD_MEMORY else "")
        for model, n in sorted(models.items(), key=lambda kv: -kv[1])
        if n
    )
    cpus = sum(n.cpu for n in trace.nodes) / 1000
    return (
        f"{len(trace.pods):,} pods on {len(trace.nodes):,} nodes "
        f"({trace.cards:,} GPUs: {cards}; {cpus:,.0f} CPUs)"
    )


def table(trace: Trace, runs: Sequence[PolicyRuns]) -> str:
    """The comparison `vgpu simulate --trace` prints."""
    if not runs:
        return "no runs\n"
    seeds = [r.seed for r in runs[0].replays]
    paper = PUBLISHED.get(trace.name, {})
    pairs = any(isinstance(r.policy, PolicyPair) for r in runs)
    stream = runs[0].mean(lambda r: r.pods)
    lines = [
        f"vgpu simulate --trace {trace.name}: {describe(trace)}",
        f"Each run: the pods shuffled by its seed and tuned to ask for {LOAD * 100:.0f} % of the "
        f"GPU ({stream:,.0f} pods), none leaving; seeds {_seeds(seeds)}.",
        "",
        "GPU allocated when 100 % and 130 % of it has arrived, in percent: mean ±sd over the "
        "seeds" + ("; the paper's in brackets" if paper else ""),
        "",
    ]
    rows = [
        [
            policy_name(r.policy) + ("*" if r.policy == HAMI_DEFAULT else ""),
            *(_cell(r.at(mark), _published(_paper(paper, r.policy), mark)) for mark in MARKS),
            f"{r.mean(lambda x: x.failed):,.0f}",
            f"{r.mean(lambda x: x.cpu_seconds):.2f}",
        ]
        for r in runs
    ]
    header = ["policy", "at 100 %", "at 130 %", "failed pods", "CPU s/run"]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells))
    lines.append("")
    best = _best(runs)
    if best:
        lines.append(f"Most GPU allocated at 100 % arrived: {', '.join(best)}.")
    lines.extend(_against_hami(runs))
    lines.extend(_dra_against_hami(runs))
    if pairs:
        lines.append(
            "* HAMi's default (node binpack, GPU spread). HAMi's pairs are node/GPU policies run\n"
            "  through vgpu's scheduler (Ledger.decide) behind the same CPU and memory filter."
        )
    lines.append(
        "Failed pods fit on no node when they arrived (they still count as arrived); "
        "CPU s/run is the replay's own time."
    )
    return "\n".join(lines) + "\n"


def document(trace: Trace, runs: Sequence[PolicyRuns], *, curves: bool = False) -> dict[str, Any]:
    """The `--json` output (with every seed's curve in a report's `results.json`)."""
    paper = PUBLISHED.get(trace.name, {})
    return {
        "trace": {
            "name": trace.name,
            "pods": len(trace.pods),
            "nodes": len(trace.nodes),
            "gpus": trace.cards,
            "cluster": describe(trace),
            "load": LOAD,
            "seeds": [r.seed for r in runs[0].replays] if runs else [],
        },
        "runs": [_run(r, _paper(paper, r.policy), curves) for r in runs],
    }


def _run(runs: PolicyRuns, paper: Published | None, curves: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"policy": policy_name(runs.policy)}
    for mark in MARKS:
        spread = runs.at(mark)
        body[f"at_{mark}"] = (
            None
            if spread is None
            else {"mean": spread.mean, "sd": spread.sd, "seeds": list(spread.values)}
        )
    if paper is not None:
        body["paper"] = {
            "at_100": {"mean": paper.at_100, "sd": paper.sd_100},
            "at_130": {"mean": paper.at_130, "sd": paper.sd_130},
        }
    body["pods"] = round(runs.mean(lambda r: r.pods), 1)
    body["failed"] = round(runs.mean(lambda r: r.failed), 1)
    body["timing"] = {
        "cpu_seconds": round(runs.mean(lambda r: r.cpu_seconds), 3),
        "wall_seconds": round(runs.mean(lambda r: r.wall_seconds), 3),
    }
    body["curve"] = runs.curve()
    if curves:
        body["per_seed"] = [{"seed": r.seed, "curve": r.allocation} for r in runs.replays]
    return body


def _cell(spread: Spread | None, published: float | None) -> str:
    if spread is None:
        return "-"
    text = f"{spread.mean:.2f} ±{spread.sd:.2f}"
    return text if published is None else f"{text} ({published:.2f})"


def _paper(paper: dict[PaperPolicy, Published], policy: TracePolicy) -> Published | None:
    return paper.get(policy) if isinstance(policy, PaperPolicy) else None


def _against_hami(runs: Sequence[PolicyRuns]) -> list[str]:
    """The headline: FGD's allocation against HAMi's default pair's, when both ran."""
    by_policy = {r.policy: r for r in runs}
    fgd, hami = by_policy.get(PaperPolicy.FGD), by_policy.get(HAMI_DEFAULT)
    if fgd is None or hami is None:
        return []
    gains = []
    for mark in MARKS:
        ours, theirs = fgd.at(mark), hami.at(mark)
        if ours is not None and theirs is not None:
            gains.append(f"{ours.mean - theirs.mean:+.2f} points at {mark} % arrived")
    if not gains:
        return []
    return [f"vgpu's fgd against HAMi's default {HAMI_DEFAULT.label}: {', '.join(gains)}."]


def _dra_against_hami(runs: Sequence[PolicyRuns]) -> list[str]:
    """DRA's allocation and failed pods against HAMi's default pair's, when both ran."""
    by_policy = {r.policy: r for r in runs}
    dra, hami = by_policy.get(DraMode.KUBE_SCHEDULER), by_policy.get(HAMI_DEFAULT)
    if dra is None:
        return []
    note = [
        "dra: each pod a ResourceClaim on vgpu's shared DRA devices (gpu.vgpu.io), allocated by\n"
        "  kube-scheduler's allocator on the first node by rank that can serve it."
    ]
    if hami is None:
        return note
    gains = [
        f"{ours.mean - theirs.mean:+.2f} points at {mark} % arrived"
        for mark in MARKS
        if (ours := dra.at(mark)) is not None and (theirs := hami.at(mark)) is not None
    ]
    failed = (
        f"failed pods {dra.mean(lambda r: r.failed):,.0f} against "
        f"{hami.mean(lambda r: r.failed):,.0f}"
    )
    headline = f"DRA against HAMi's default {HAMI_DEFAULT.label}: {', '.join(gains)}; {failed}."
    return [*textwrap.wrap(headline, width=96, subsequent_indent="  "), *note]


def _published(paper: Published | None, mark: int) -> float | None:
    if paper is None:
        return None
    return paper.at_100 if mark == 100 else paper.at_130


def _best(runs: Sequence[PolicyRuns]) -> list[str]:
    means = {r.policy: s.mean for r in runs if (s := r.at(100)) is not None}
    if not means:
        return []
    top = max(means.values())
    return [policy_name(p) for p, m in means.items() if m == top]


def _seeds(seeds: Sequence[int]) -> str:
    if len(seeds) > 2 and list(seeds) == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}..{seeds[-1]}"
    return ", ".join(map(str, seeds))
