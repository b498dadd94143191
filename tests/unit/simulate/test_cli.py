"""`vgpu simulate` as a user runs it: table, JSON, one policy, bad input."""

import json
from pathlib import Path

import pytest

from vgpu.app.cli import main

from .builders import TINY


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return path


def simulate(*args: str) -> int:
    return main(["simulate", "--jobs", "1", "--no-progress", *args])


def test_the_table_compares_all_four_policy_pairs(
    scenario_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert simulate("--scenario", str(scenario_file)) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "binpack/binpack" in line)
    assert header.split() == [
        "binpack/binpack",
        "binpack/spread*",
        "spread/binpack",
        "spread/spread",
    ]
    for row in ("pods submitted", "pending at end", "GPU memory used, mean / p95", "fragmentation"):
        assert row in out
    assert "Suits this workload best:" in out


def test_json_parses_and_holds_one_run_per_pair(
    scenario_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert simulate("--scenario", str(scenario_file), "--json", "--seed", "5") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["scenario"]["seed"] == 5
    assert data["scenario"]["gpus"] == 6
    assert [r["policy"] for r in data["runs"]] == [
        "binpack/binpack",
        "binpack/spread",
        "spread/binpack",
        "spread/spread",
    ]
    run = data["runs"][0]
    pods = run["pods"]
    assert (
        pods["submitted"] == pods["denied_at_admission"] + pods["placed"] + pods["pending_at_end"]
    )
    assert 0 <= run["utilisation"]["memory"]["mean"] <= run["utilisation"]["memory"]["p95"] <= 1


def test_policy_runs_only_that_pair(
    scenario_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert simulate("--scenario", str(scenario_file), "--json", "--policy", "spread/binpack") == 0
    assert [r["policy"] for r in json.loads(capsys.readouterr().out)["runs"]] == ["spread/binpack"]


def test_a_pair_named_twice_runs_once(
    scenario_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert simulate(
        "--scenario", str(scenario_file), "--json", "--policy", "spread/binpack, spread/binpack"
    ) == 0
    assert [r["policy"] for r in json.loads(capsys.readouterr().out)["runs"]] == ["spread/binpack"]


def test_seed_changes_the_workload(scenario_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = []
    for seed in ("1", "1", "2"):
        simulate(
            "--scenario", str(scenario_file), "--json", "--policy", "binpack/spread", "--seed", seed
        )
        outputs.append(json.loads(capsys.readouterr().out)["runs"][0]["pods"])
    assert outputs[0] == outputs[1] != outputs[2]


def test_an_invalid_scenario_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(TINY.replace("count: 3", "count: many"))
    assert simulate("--scenario", str(bad)) == 2
    err = capsys.readouterr().err
    assert f"{bad}: nodes[0].count: Input should be a valid integer" in err
    assert "Traceback" not in err


def test_a_missing_scenario_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert simulate("--scenario", str(tmp_path / "nope.yaml")) == 2
    assert "cannot read scenario" in capsys.readouterr().err


def test_an_unknown_policy_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        simulate("--policy", "binpack/tight")
    assert exit_.value.code == 2
    assert "GPU policy 'tight'" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", ["0", "5", "9"])
def test_jobs_outside_one_to_four_are_refused_by_the_parser(
    jobs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", "--jobs", jobs])
    assert exit_.value.code == 2
    assert f"argument --jobs: '{jobs}' must be from 1 to 4" in capsys.readouterr().err


def test_print_scenario_prints_the_embedded_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert simulate("--print-scenario") == 0
    assert "NVIDIA A100-SXM4-80GB" in capsys.readouterr().out


def test_the_verdict_names_the_pairs_that_placed_most(
    scenario_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert simulate("--scenario", str(scenario_file)) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if "binpack/binpack" in line).split()
    placed = [int(v) for v in next(line for line in lines if line.startswith("placed")).split()[1:]]
    most = [pair.rstrip("*") for pair, n in zip(header, placed, strict=True) if n == max(placed)]
    verdict = next(line for line in lines if line.startswith("Most pods placed:"))
    assert verdict.startswith(f"Most pods placed: {', '.join(most)}.")


def test_report_without_matplotlib_says_how_to_install_it(
    scenario_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a)
    )
    assert simulate("--scenario", str(scenario_file), "--report", str(tmp_path / "r")) == 2
    assert "pip install 'vgpu[simulate]'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
