"""`vgpu simulate --dra`: the pods as ResourceClaims, allocated by kube-scheduler's allocator
on the simulated GPUs, beside the device-plugin mode."""

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from vgpu.app.cli import main
from vgpu.app.simulate.dra import DraMode, DraPlacer
from vgpu.app.simulate.engine import HAMI_DEFAULT, Simulation, State
from vgpu.app.simulate.trace.dra_pairs import DraPair
from vgpu.app.simulate.trace.files import read_nodes, read_pods
from vgpu.app.simulate.trace.hami import hami_devices, hami_manifest
from vgpu.app.simulate.trace.protocol import arrivals, node_ranks
from vgpu.app.simulate.trace.replay import Trace
from vgpu.domain import (
    NoPlacement,
    Placement,
    PodPlan,
    SchedulingConfig,
    plan_pod,
    pod_from_manifest,
)
from vgpu.domain.fragmentation import MILLI, MilliNode, MilliPod

from .builders import TINY, arrival, cluster
from .test_trace_cli import NODES, PODS

DRA = DraMode.KUBE_SCHEDULER


def test_a_claim_waits_for_the_memory_an_earlier_claim_frees() -> None:
    pods = [
        arrival("a", 0, 3600, gpu=1, gpumem=30000, gpucores=50),
        arrival("b", 60, 3600, gpu=1, gpumem=20000, gpucores=10),
    ]
    simulation = Simulation(cluster(), DRA, pods)
    result = simulation.run()
    a, b = simulation.pods
    assert (a.placed_at, b.placed_at) == (0, 3600)  # 30000 + 20000 MiB > the 40 GiB card
    assert result.policy == "dra" and result.placed == 2 and result.pending_end == 0


def test_dra_has_no_split_count_where_the_device_plugin_has() -> None:
    pods = [arrival(f"p{i}", i, 3600, gpu=1, gpumem=1000) for i in range(5)]  # split 4
    dra = Simulation(cluster(), DRA, pods)
    dra.run()
    plugin = Simulation(cluster(), HAMI_DEFAULT, pods)
    plugin.run()
    assert [p.placed_at for p in dra.pods] == [0, 1, 2, 3, 4]
    assert sum(p.placed_at >= 0 for p in plugin.pods) == 5
    assert plugin.pods[4].placed_at == 3600  # waited for one of the four slices


def test_a_claim_no_card_can_take_is_pending_for_memory() -> None:
    simulation = Simulation(cluster(), DRA, [arrival("big", 0, 60, gpu=1, gpumem=50000)])
    result = simulation.run()
    assert simulation.pods[0].state is State.PENDING
    assert result.pending_reasons.top().startswith("1 insufficient memory")


def _plan(pod: MilliPod, key: str) -> PodPlan:
    plan = plan_pod(pod_from_manifest(hami_manifest("trace-pod", pod, {})), SchedulingConfig())
    assert plan is not None
    return replace(plan, key=key)


def test_the_placer_keeps_what_claims_hold_and_frees_it() -> None:
    placer = DraPlacer({"n": hami_devices("n", MilliNode("T4", 8000, 32768, (MILLI,)))})
    plan = _plan(MilliPod(cpu=1000, memory=1024, gpus=1, milli=600), "trace/p0")
    assert isinstance(placer.decide(plan, ["n"]), Placement)
    placer.placed(plan.key, "n")
    again = placer.decide(plan, ["n"], explain=True)  # 60 % + 60 % of one card
    assert isinstance(again, NoPlacement)
    assert again.rejections["n"].message == (
        "claim trace/p0-gpu, request main/card-16384mi: 0 devices on n could serve it, it needs 1"
    )
    placer.released(plan.key)
    assert isinstance(placer.decide(plan, ["n"]), Placement)


def test_the_trace_index_chooses_as_trying_every_node_in_rank_order(tmp_path: Path) -> None:
    """DraPair drops nodes for good once they cannot serve a need; trying every node with
    room, in rank order, must give the same nodes."""
    (tmp_path / "n.csv").write_text(NODES)
    (tmp_path / "p.csv").write_text(PODS)
    trace = Trace.of("t", read_nodes(tmp_path / "n.csv"), read_pods(tmp_path / "p.csv"))
    rng = random.Random(7)
    stream = arrivals(trace.pods, trace.cards * MILLI, rng)
    ranks = node_ranks(len(trace.nodes), rng)
    indexed = DraPair(trace.nodes, ranks)
    names = indexed._names
    placer = DraPlacer(
        {n: hami_devices(n, node) for n, node in zip(names, trace.nodes, strict=True)}
    )
    cpu = [n.cpu for n in trace.nodes]
    memory = [n.memory for n in trace.nodes]
    order = sorted(range(len(names)), key=names.__getitem__)
    for number, pod in enumerate(stream):
        chosen = indexed.choose(pod)
        if chosen is not None:
            indexed.place(chosen, pod)
        room = [names[i] for i in order if cpu[i] >= pod.cpu and memory[i] >= pod.memory]
        if not pod.gpus:
            expected = names.index(room[0]) if room else None
        else:
            plan = _plan(pod, f"trace/p{number}")
            decision = placer.decide(plan, room)
            expected = None
            if isinstance(decision, Placement):
                expected = names.index(decision.node)
                placer.placed(plan.key, decision.node)
        assert chosen == expected, f"pod {number}"
        if expected is not None:
            cpu[expected] -= pod.cpu
            memory[expected] -= pod.memory


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return path


def test_the_cli_compares_dra_with_hamis_default_pair(
    scenario_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--no-progress", "--scenario", str(scenario_file), "--dra"]) == 0
    out = capsys.readouterr().out
    assert "binpack/spread*" in out and "        dra" in out
    assert "With DRA (claims allocated by kube-scheduler; binpack/spread in brackets)" in out
    assert (
        main(["simulate", "--no-progress", "--scenario", str(scenario_file), "--dra", "--json"])
        == 0
    )
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [r["policy"] for r in runs] == ["binpack/spread", "dra"]


def test_dra_with_preemption_is_refused(
    scenario_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["simulate", "--no-progress", "--scenario", str(scenario_file), "--dra", "--preemption"]
    assert main(args) == 2
    assert "--dra does not model preemption" in capsys.readouterr().err


def test_the_trace_with_dra_adds_a_row_and_the_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "n.csv").write_text(NODES)
    (tmp_path / "p.csv").write_text(PODS)
    args = ["--trace", str(tmp_path / "p.csv"), "--nodes", str(tmp_path / "n.csv"), "--seeds", "2"]
    assert main(["simulate", "--no-progress", *args, "--dra"]) == 0
    out = capsys.readouterr().out
    rows = [line.split()[0] for line in out.splitlines() if line.startswith(("binpack", "dra "))]
    assert rows == ["binpack/spread*", "dra"]
    assert "DRA against HAMi's default binpack/spread:" in out
