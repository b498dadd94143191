"""`--report DIR`: PNG plots (utilisation over time, per-node heatmap), an HTML page, JSON."""

import html
import json
from collections.abc import Sequence
from pathlib import Path

from .metrics import RunResult
from .report import describe_cluster, document, table
from .scenario import Scenario

_PANELS = (
    ("GPU memory used", "memory"),
    ("GPU cores used", "cores"),
    ("GPU slices used", "slices"),
    ("stranded free memory", "fragmentation"),
)


def write_report(
    directory: Path, scenario: Scenario, seed: int, results: Sequence[RunResult]
) -> list[Path]:
    """Write `utilisation.png`, `heatmap.png`, `results.json` and `index.html`; return them."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    directory.mkdir(parents=True, exist_ok=True)
    written = [
        _utilisation(directory / "utilisation.png", scenario, results),
        _heatmap(directory / "heatmap.png", results),
    ]
    data = directory / "results.json"
    data.write_text(json.dumps(document(scenario, seed, results, series=True), indent=2) + "\n")
    written.append(data)
    page = directory / "index.html"
    page.write_text(_page(scenario, seed, results), encoding="utf-8")
    written.append(page)
    return written


def _utilisation(path: Path, scenario: Scenario, results: Sequence[RunResult]) -> Path:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(_PANELS) + 1, 1, figsize=(10, 12), sharex=True)
    for result in results:
        hours = [t / 3600 for t in result.series.times]
        for ax, (_, key) in zip(axes, _PANELS, strict=False):
            ax.plot(hours, [v * 100 for v in getattr(result.series, key)], label=result.policy)
        axes[-1].plot(hours, result.series.pending, label=result.policy)
    for ax, (title, _) in zip(axes, _PANELS, strict=False):
        ax.set_ylabel(f"{title} (%)")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
    axes[-1].set_ylabel("pods pending")
    axes[-1].set_xlabel("simulated time (hours)")
    axes[-1].grid(alpha=0.3)
    axes[0].legend(title="node/GPU policy", loc="upper left", fontsize="small")
    axes[0].set_title(f"{scenario.name}: {describe_cluster(scenario)}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _heatmap(path: Path, results: Sequence[RunResult]) -> Path:
    import matplotlib.pyplot as plt

    columns = min(len(results), 2)
    rows = (len(results) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(7 * columns, 4.5 * rows), squeeze=False)
    image = None
    for ax, result in zip(axes.flat, results, strict=False):
        series = result.series
        grid = [list(column) for column in zip(*series.node_memory, strict=True)]
        end = series.times[-1] / 3600 if series.times else 1.0
        image = ax.imshow(
            grid,
            aspect="auto",
            interpolation="nearest",
            vmin=0,
            vmax=1.0,
            cmap="viridis",
            extent=(0, end, len(series.node_names) - 0.5, -0.5),
        )
        ax.set_title(f"{result.policy}: GPU memory used per node")
        ax.set_xlabel("simulated time (hours)")
        ax.set_ylabel("node")
        if len(series.node_names) <= 40:
            ax.set_yticks(range(len(series.node_names)), series.node_names, fontsize="x-small")
    for ax in list(axes.flat)[len(results) :]:
        ax.axis("off")
    if image is not None:
        fig.colorbar(image, ax=axes, label="share of the node's GPU memory in use", shrink=0.8)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _page(scenario: Scenario, seed: int, results: Sequence[RunResult]) -> str:
    title = html.escape(f"vgpu simulate: {scenario.name}")
    details = "".join(
        f"<h3>{html.escape(r.policy)}: pending at end</h3><ul>"
        + "".join(
            f"<li>{count} pods: {html.escape(reason)}<br><small>"
            f"{html.escape(dict(r.pending_reasons.examples).get(reason, ''))}</small></li>"
            for reason, count in r.pending_reasons.counts
        )
        + "</ul>"
        for r in results
        if r.pending_end
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}
pre{{background:#f6f6f6;padding:1em;overflow-x:auto}}img{{max-width:100%}}</style></head>
<body><h1>{title}</h1>
<p>{html.escape(scenario.description)}</p>
<pre>{html.escape(table(scenario, seed, results))}</pre>
<h2>Utilisation over time</h2><img src="utilisation.png" alt="utilisation over time">
<h2>GPU memory per node</h2><img src="heatmap.png" alt="per-node heatmap">
{details}
<p>Numbers: <a href="results.json">results.json</a></p>
</body></html>
"""
