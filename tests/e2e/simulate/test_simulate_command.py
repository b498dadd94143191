"""`vgpu simulate` run as the installed console script, the way a user starts it."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.unit.simulate.builders import TINY


def vgpu() -> str:
    beside = Path(sys.executable).parent / "vgpu"
    found = str(beside) if beside.exists() else shutil.which("vgpu")
    assert found, "the vgpu console script is not installed"
    return found


def test_json_and_report_from_the_console_script(tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    report = tmp_path / "report"
    done = subprocess.run(
        [vgpu(), "simulate", "--scenario", str(scenario), "--json", "--report", str(report)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert len(data["runs"]) == 4
    assert data["scenario"]["name"] == "tiny"

    for picture in ("utilisation.png", "heatmap.png"):
        assert (report / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (report / "index.html").read_text()
    assert 'src="utilisation.png"' in page and 'src="heatmap.png"' in page
    assert "binpack/spread" in page
    saved = json.loads((report / "results.json").read_text())
    assert [r["pods"] for r in saved["runs"]] == [r["pods"] for r in data["runs"]]
    series = saved["runs"][0]["series"]
    assert len(series["times"]) == len(series["memory"]) == 6 * 6 + 1  # every 10 minutes, 6 hours


def test_a_bad_scenario_fails_with_a_message_not_a_traceback(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(TINY.replace("arrivals_per_hour: 8", "arrivals_per_hour: lots"))
    done = subprocess.run(
        [vgpu(), "simulate", "--scenario", str(scenario)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "workloads[0].arrivals_per_hour" in done.stderr
    assert "Traceback" not in done.stderr
