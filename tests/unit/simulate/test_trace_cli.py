"""`vgpu simulate --trace` as a user runs it, on small trace files: table, JSON, bad input."""

import json
from pathlib import Path

import pytest

from vgpu.app.cli import main

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"n-{i:02d},64000,262144,8,{'T4' if i < 4 else 'G2'}\n" for i in range(12)
)
# mostly shares of one card, every fifth pod two whole cards, every seventh only on T4
PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n" + "".join(
    f"p-{i:03d},{2000 + 1000 * (i % 3)},4096,{2 if i % 5 == 0 else 1},"
    f"{1000 if i % 5 == 0 else (250, 500, 700, 1000)[i % 4]},{'T4' if i % 7 == 0 else ''}\n"
    for i in range(120)
)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    pods, nodes = tmp_path / "pods.csv", tmp_path / "nodes.csv"
    pods.write_text(PODS)
    nodes.write_text(NODES)
    return pods, nodes


def simulate(*args: str) -> int:
    return main(["simulate", "--no-progress", *args])


def test_the_table_shows_each_policy_at_100_and_130_percent(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pods, nodes = files
    assert (
        simulate(
            "--trace", str(pods), "--nodes", str(nodes), "--seeds", "3", "--policy", "fgd,random"
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith(
        "vgpu simulate --trace pods.csv on nodes.csv: 120 pods on 12 nodes (96 GPUs: G2 64 x 20000 MiB, T4 32 x 16384 MiB; 768 CPUs)"
    )
    assert "seeds 42..44" in out
    rows = {
        line.split()[0]: line for line in out.splitlines() if line.startswith(("fgd", "random"))
    }
    assert set(rows) == {"fgd", "random"}
    assert "(" not in rows["fgd"]  # no published figures for a user's trace
    assert "Most GPU allocated at 100 % arrived:" in out


def test_hami_s_pairs_run_beside_the_paper_s_policies_with_fgd_against_hami_s_default(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pods, nodes = files
    common = ["--trace", str(pods), "--nodes", str(nodes), "--seeds", "2"]
    assert simulate(*common, "--policy", "fgd,binpack/spread,spread/spread") == 0
    out = capsys.readouterr().out
    names = {"fgd", "binpack/spread*", "spread/spread"}
    lines = [line.split() for line in out.splitlines() if line.strip()]
    rows = {words[0]: words for words in lines if words[0] in names}
    assert set(rows) == names
    gain = float(rows["fgd"][1]) - float(rows["binpack/spread*"][1])
    assert f"vgpu's fgd against HAMi's default binpack/spread: {gain:+.2f} points at 100 %" in out
    assert "* HAMi's default (node binpack, GPU spread)" in out
    assert simulate(*common, "--policy", "spread/binpack", "--json") == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["policy"] == "spread/binpack" and "paper" not in run
    assert 0 < run["at_100"]["mean"] <= 100


def test_json_holds_every_seed_and_the_mean_curve(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pods, nodes = files
    assert (
        simulate(
            "--trace",
            str(pods),
            "--nodes",
            str(nodes),
            "--seed",
            "7",
            "--seeds",
            "2",
            "--json",
            "--policy",
            "bestfit",
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["trace"]["seeds"] == [7, 8] and data["trace"]["gpus"] == 96
    (run,) = data["runs"]
    assert run["policy"] == "bestfit" and "paper" not in run
    assert len(run["at_100"]["seeds"]) == 2
    assert run["curve"]["100"] == run["at_100"]["mean"]
    assert all(0 <= v <= 100 for v in run["curve"].values())


def test_the_same_seeds_give_the_same_figures(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pods, nodes = files
    outputs = []
    for _ in range(2):
        simulate(
            "--trace",
            str(pods),
            "--nodes",
            str(nodes),
            "--seeds",
            "2",
            "--json",
            "--policy",
            "random",
        )
        outputs.append(json.loads(capsys.readouterr().out)["runs"][0]["curve"])
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--scenario", "x.yaml"], "--scenario does not apply to a trace replay"),
        (["--preemption"], "--preemption does not apply to a trace replay"),
        (
            ["--policy", "fgd/fgd"],
            "--policy fgd/fgd: a trace replays HAMi's pairs of binpack and spread; FGD is the "
            "paper's policy fgd",
        ),
    ],
)
def test_options_of_the_scenario_simulator_are_refused_with_a_trace(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert simulate("--trace", str(files[0]), *extra) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("words", "option"),
    [
        (["--policy", "fgd"], "--policy fgd"),
        (["--nodes", "n.csv"], "--nodes"),
        (["--seeds", "3"], "--seeds"),
    ],
)
def test_trace_options_without_a_trace_are_refused(
    capsys: pytest.CaptureFixture[str], words: list[str], option: str
) -> None:
    assert simulate(*words) == 2
    assert f"{option} applies to a trace replay (--trace)" in capsys.readouterr().err


@pytest.mark.parametrize("trace", [[], ["--trace", "default"]])
@pytest.mark.parametrize("word", ["tetris", "binpack"])
def test_an_unknown_policy_names_both_forms_and_what_a_trace_takes(
    capsys: pytest.CaptureFixture[str], trace: list[str], word: str
) -> None:
    with pytest.raises(SystemExit):
        simulate(*trace, "--policy", f"fgd,{word}")
    err = capsys.readouterr().err
    assert (
        f"'{word}' is not a policy: give NODE/GPU pairs of binpack, spread, fgd, fgd-balanced such "
        "as binpack/spread"
        in err
    )
    assert (
        "with --trace, the replay's policies (random, dotprod, gpuclustering, gpupacking, bestfit, fgd, fgd-balanced)"
        in err
    )
    assert (
        "and HAMi's pairs (binpack/binpack, binpack/spread, spread/binpack, spread/spread)" in err
    )


def test_a_policy_named_twice_is_replayed_once(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    twice = "fgd,binpack/spread,FGD,binpack/spread"
    trace = ["--trace", str(files[0]), "--nodes", str(files[1]), "--seeds", "1", "--json"]
    assert simulate(*trace, "--policy", twice) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [run["policy"] for run in runs] == ["fgd", "binpack/spread"]


def test_a_bad_trace_row_exits_2_naming_file_line_and_column(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pods, nodes = files
    pods.write_text(PODS.replace("p-003,2000,4096,1,1000", "p-003,2000,4096,1,1001"))
    assert simulate("--trace", str(pods), "--nodes", str(nodes)) == 2
    err = capsys.readouterr().err
    assert (
        "invalid trace" in err
        and "pods.csv line 5: gpu_milli: 1001 is out of range (0..1000)" in err
    )
