"""A benchmark run writes its figures where git does not track them: the committed figures that
docs/benchmarks.md cites (bench/results/) stay as they were measured."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
sys.path.append(str(REPO / "bench"))  # the benchmarks import their helpers as scripts do

import filter_domain  # noqa: E402


def ignored_and_untracked(path: Path) -> bool:
    relative = str(path.relative_to(REPO))
    ignored = subprocess.run(["git", "check-ignore", "-q", relative], cwd=REPO).returncode == 0
    tracked = (
        subprocess.run(
            ["git", "ls-files", "--error-unmatch", relative], cwd=REPO, capture_output=True
        ).returncode
        == 0
    )
    return ignored and not tracked


@pytest.mark.parametrize("quick", [False, True])
def test_filter_domain_writes_outside_the_tracked_files_by_default(quick: bool) -> None:
    out = filter_domain.output_file(None, quick)

    assert out.is_relative_to(REPO)
    assert ignored_and_untracked(out)


def test_the_figures_the_benchmarks_page_cites_are_committed() -> None:
    cited = REPO / "bench" / "results" / "filter_domain.json"

    assert "bench/results/filter_domain.json" in (REPO / "docs" / "benchmarks.md").read_text()
    assert not ignored_and_untracked(cited)
    assert filter_domain.output_file(None, False) != cited
