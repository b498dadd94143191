"""What both kinds of run share: the progress bar, the report directory and its plotting
library."""

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .progress import ProgressBar

T = TypeVar("T")


def with_progress(
    label: str, enabled: bool, work: Callable[[Callable[[float], None]], T]
) -> T | None:
    """`work(update)` with a progress bar on stderr (when `enabled` and stderr is a terminal);
    None when interrupted, after saying so."""
    bar = ProgressBar(sys.stderr, label, enabled=enabled and sys.stderr.isatty())
    try:
        result = work(bar.update)
    except KeyboardInterrupt:
        bar.close()
        print("vgpu simulate: interrupted", file=sys.stderr)
        return None
    bar.close()
    return result


def plots_unavailable() -> bool:
    """True (and says so on stderr) when `--report` cannot draw: matplotlib is missing."""
    if importlib.util.find_spec("matplotlib") is not None:
        return False
    print(
        "vgpu simulate: --report draws plots with matplotlib, which is not installed; "
        "install it with: pip install 'vgpu[simulate]'",
        file=sys.stderr,
    )
    return True


def save_report(directory: Path, write: Callable[[Path], list[Path]]) -> int:
    """Run `write(directory)` (which returns the files written, the page last); the exit
    status: 1 when the directory cannot be written."""
    try:
        written = write(directory)
    except OSError as exc:
        print(f"vgpu simulate: cannot write the report to {directory}: {exc}", file=sys.stderr)
        return 1
    print(f"report: {written[-1]}", file=sys.stderr)
    return 0
