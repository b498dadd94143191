"""`--trace ... --report DIR`: the allocation curves as a PNG, an HTML page and the JSON."""

import html
import json
from collections.abc import Sequence
from pathlib import Path

from ..engine import PolicyPair
from .experiments import PolicyRuns
from .replay import Trace, policy_name
from .report import describe, document, table


def write_report(directory: Path, trace: Trace, runs: Sequence[PolicyRuns]) -> list[Path]:
    """Write `allocation.png`, `results.json` and `index.html`; return them."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    directory.mkdir(parents=True, exist_ok=True)
    picture = _allocation(directory / "allocation.png", trace, runs)
    data = directory / "results.json"
    data.write_text(json.dumps(document(trace, runs, curves=True), indent=2) + "\n")
    page = directory / "index.html"
    page.write_text(_page(trace, runs), encoding="utf-8")
    return [picture, data, page]


def _allocation(path: Path, trace: Trace, runs: Sequence[PolicyRuns]) -> Path:
    import matplotlib.pyplot as plt

    fig, (whole, close) = plt.subplots(1, 2, figsize=(13, 5.5))
    for ax in (whole, close):
        top = max((max(r.curve(), default=0) for r in runs), default=0)
        ax.plot([0, top], [0, top], color="0.7", linestyle="--", label="everything placed")
        for r in runs:
            curve = r.curve()
            hami = isinstance(r.policy, PolicyPair)  # HAMi's pairs dashed, the paper's solid
            ax.plot(
                list(curve),
                list(curve.values()),
                label=policy_name(r.policy),
                linestyle="--" if hami else "-",
            )
        ax.set_xlabel("GPU arrived (% of the cluster's)")
        ax.set_ylabel("GPU allocated (% of the cluster's)")
        ax.grid(alpha=0.3)
    whole.set_title(f"{trace.name}: GPU allocated as pods arrive")
    whole.legend(loc="upper left", fontsize="small")
    close.set_xlim(70, top + 1)
    close.set_ylim(70, 100)
    close.set_title("from 70 % on")
    fig.suptitle(describe(trace), fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _page(trace: Trace, runs: Sequence[PolicyRuns]) -> str:
    title = html.escape(f"vgpu simulate --trace {trace.name}")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:1300px;margin:2em auto}}
pre{{background:#f6f6f6;padding:1em;overflow-x:auto}}img{{max-width:100%}}</style></head>
<body><h1>{title}</h1>
<pre>{html.escape(table(trace, runs))}</pre>
<h2>GPU allocated as the workload arrives</h2>
<p>Mean over the seeds of the share of the cluster's GPU allocated when each percent of it has
arrived (failed pods count as arrived). The dashed line is a cluster that places everything.</p>
<img src="allocation.png" alt="allocation ratio against arrived workload, one line per policy">
<p>Numbers, with every seed's curve: <a href="results.json">results.json</a></p>
</body></html>
"""
