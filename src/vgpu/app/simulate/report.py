"""The runs side by side: a plain-text table for people and a JSON document for programs."""

import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from .dra import DraMode
from .engine import HAMI_DEFAULT
from .metrics import RunResult
from .scenario import Scenario

Row = tuple[str, Callable[[RunResult], str]]


def describe_cluster(scenario: Scenario) -> str:
    """`32 nodes x 8 NVIDIA A100-SXM4-80GB (split 10)`, pools joined with `+`."""
    return " + ".join(
        f"{p.count} nodes x {p.gpus} {p.model} (split {p.split_count})" for p in scenario.nodes
    )


def duration(seconds: float) -> str:
    """A short human duration: `0s`, `45s`, `12m`, `2.5h`."""
    if seconds < 1:
        return "0s"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%"


def _pair(mean: float, p95: float) -> str:
    return f"{_pct(mean)} / {_pct(p95)}"


ROWS: tuple[Row, ...] = (
    ("pods submitted", lambda r: str(r.submitted)),
    ("denied at admission", lambda r: str(r.denied)),
    ("placed", lambda r: str(r.placed)),
    ("  of them after waiting", lambda r: str(r.placed - r.placed_at_once)),
    ("pending at end", lambda r: str(r.pending_end)),
    ("wait of waiting pods, mean", lambda r: duration(r.wait_mean)),
    ("wait p95 (all placed)", lambda r: duration(r.wait_p95)),
    ("GPU memory used, mean / p95", lambda r: _pair(r.memory_mean, r.memory_p95)),
    ("GPU cores used, mean / p95", lambda r: _pair(r.cores_mean, r.cores_p95)),
    ("GPU slices used, mean / p95", lambda r: _pair(r.slices_mean, r.slices_p95)),
    ("fragmentation, mean / p95", lambda r: _pair(r.fragmentation_mean, r.fragmentation_p95)),
    ("scheduling decisions/s", lambda r: f"{r.decisions_per_second:,.0f}"),
)
PREEMPTION_ROWS: tuple[Row, ...] = (
    (
        "placed by preempting",
        lambda r: str(r.preemptions.placed_by_preempting if r.preemptions else 0),
    ),
    ("evicted by preemption", lambda r: str(r.preemptions.evicted if r.preemptions else 0)),
)


def table(scenario: Scenario, seed: int, results: Sequence[RunResult]) -> str:
    """The comparison the `vgpu simulate` command prints."""
    if not results:
        return "no runs\n"
    first = results[0]
    rows = ROWS + (PREEMPTION_ROWS if any(r.preemptions for r in results) else ())
    headers = [r.policy + ("*" if r.policy == HAMI_DEFAULT.label else "") for r in results]
    label_width = max(len(label) for label, _ in rows) + 2
    widths = [
        max(len(h), *(len(cell(r)) for _, cell in rows)) + 2
        for h, r in zip(headers, results, strict=True)
    ]
    lines = [
        f"vgpu simulate: {scenario.name}: {describe_cluster(scenario)}",
        f"{first.submitted} pods over {duration(scenario.duration)} (seed {seed}); "
        "policies are node/GPU" + ("; preemption on" if first.preemptions else ""),
        "",
        "".ljust(label_width) + "".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)),
    ]
    for label, cell in rows:
        cells = "".join(cell(r).rjust(w) for r, w in zip(results, widths, strict=True))
        lines.append(label.ljust(label_width) + cells)
    lines.append("")
    lines.extend(_reasons(results))
    pairs = [r for r in results if r.policy != DraMode.KUBE_SCHEDULER.label]
    lines.extend(_verdict(pairs))
    lines.extend(_against_dra(results))
    lines.append("")
    typical = first.typical
    lines.append("* HAMi's default (node binpack, GPU spread).")
    lines.append(
        "Fragmentation: free GPU memory on cards that cannot take the median request "
        f"({typical.memory} MiB, {typical.cores}% cores),"
    )
    lines.append(
        "as a share of all GPU memory. Utilisation and fragmentation are sampled every "
        f"{duration(scenario.sample_every)}."
    )
    return "\n".join(lines) + "\n"


def _reasons(results: Sequence[RunResult]) -> list[str]:
    width = max(len(r.policy) for r in results) + 2
    lines = []
    if any(r.pending_end for r in results):
        lines.append("Pending at end, by the reason most nodes gave (other card models aside):")
        for r in results:
            lines.append(f"  {r.policy.ljust(width)}{r.pending_reasons.top()}")
    if any(r.denied for r in results):
        lines.append("Denied at admission (the webhook's quota check):")
        for r in results:
            lines.append(f"  {r.policy.ljust(width)}{r.denied_reasons.top()}")
    return lines


def _verdict(results: Sequence[RunResult]) -> list[str]:
    if len(results) < 2:
        return []

    def best(key: Callable[[RunResult], float], higher: bool = False) -> str:
        values = [key(r) for r in results]
        target = max(values) if higher else min(values)
        return ", ".join(r.policy for r, v in zip(results, values, strict=True) if v == target)

    ranked = sorted(
        results,
        key=lambda r: (-r.placed, r.pending_end, _waited(r), r.fragmentation_mean, r.policy),
    )
    return [
        f"Most pods placed: {best(lambda r: r.placed, higher=True)}. "
        f"Least fragmentation: {best(lambda r: round(r.fragmentation_mean, 3))}. "
        f"Least waiting: {best(lambda r: round(_waited(r)))}.",
        f"Suits this workload best: {ranked[0].policy} (most placed, then fewest pending, "
        "least waiting, least fragmentation).",
    ]


def _against_dra(results: Sequence[RunResult]) -> list[str]:
    """DRA's run beside HAMi's default pair (or the first pair run)."""
    dra = next((r for r in results if r.policy == DraMode.KUBE_SCHEDULER.label), None)
    pairs = [r for r in results if r is not dra]
    if dra is None or not pairs:
        return []
    base = next((r for r in pairs if r.policy == HAMI_DEFAULT.label), pairs[0])
    columns: tuple[Row, ...] = (
        ("placed", lambda r: str(r.placed)),
        ("pending at end", lambda r: str(r.pending_end)),
        ("waited", lambda r: str(r.placed - r.placed_at_once)),
        ("GPU memory used", lambda r: _pct(r.memory_mean)),
        ("fragmentation", lambda r: _pct(r.fragmentation_mean)),
    )
    figures = ", ".join(f"{name} {value(dra)} ({value(base)})" for name, value in columns)
    return [
        *textwrap.wrap(
            f"With DRA (claims allocated by kube-scheduler; {base.policy} in brackets): {figures}.",
            width=96,
            subsequent_indent="  ",
        ),
        "  dra: each pod a ResourceClaim on vgpu's shared DRA devices, on the first node (by",
        "  name) kube-scheduler's allocator can serve; no split count, no vgpu policy, and no",
        "  namespace GPU quota while scheduling (the webhook's admission still applies).",
    ]


def _waited(result: RunResult) -> float:
    """Mean wait in seconds over every placed pod."""
    waiting = result.placed - result.placed_at_once
    return result.wait_mean * waiting / result.placed if result.placed else 0.0


def document(
    scenario: Scenario, seed: int, results: Sequence[RunResult], *, series: bool = False
) -> dict[str, Any]:
    """The `--json` output (and `results.json` of a report, with the time series)."""
    return {
        "scenario": {
            "name": scenario.name,
            "description": scenario.description,
            "seed": seed,
            "duration_seconds": scenario.duration,
            "sample_every_seconds": scenario.sample_every,
            "nodes": sum(p.count for p in scenario.nodes),
            "gpus": sum(p.count * p.gpus for p in scenario.nodes),
            "cluster": describe_cluster(scenario),
            "workloads": [w.name for w in scenario.workloads],
            **({"preemption": True} if scenario.preemption else {}),
        },
        "runs": [r.as_json(series=series) for r in results],
    }
