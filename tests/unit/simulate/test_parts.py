"""The small parts: workload generation, the webhook patch, the progress bar, the report."""

import io

from vgpu.app.simulate.admission import apply_patch
from vgpu.app.simulate.progress import ProgressBar
from vgpu.app.simulate.report import duration
from vgpu.app.simulate.scenario import parse_scenario
from vgpu.app.simulate.workload import cluster_nodes, generate_pods
from vgpu.domain import NVIDIA

from .builders import TINY, tiny


def test_nodes_register_their_cards_through_the_annotation_codec() -> None:
    nodes = cluster_nodes(tiny())
    assert [n.name for n in nodes] == ["n-0", "n-1", "n-2"]
    cards = nodes[0].devices(NVIDIA)
    assert [(c.index, c.type, c.count, c.memory, c.cores) for c in cards] == [
        (0, "NVIDIA A100-SXM4-80GB", 4, 40960, 100),
        (1, "NVIDIA A100-SXM4-80GB", 4, 40960, 100),
    ]
    assert len({c.uuid for n in nodes for c in n.devices(NVIDIA)}) == 6


def test_pods_are_kubernetes_manifests_within_the_workload_limits() -> None:
    pods = generate_pods(tiny(), 1)
    assert pods == sorted(pods, key=lambda p: p.time)
    assert all(0 <= p.time < 6 * 3600 for p in pods)
    small = [p for p in pods if p.workload == "small"]
    assert small
    for pod in small:
        limits = pod.manifest["spec"]["containers"][0]["resources"]["limits"]
        assert pod.manifest["metadata"]["namespace"] == "team"
        assert 4096 <= int(limits["nvidia.com/gpumem"]) <= 12288
        assert 10 <= int(limits["nvidia.com/gpucores"]) <= 30
    big = [p for p in pods if p.workload == "big"]
    assert {p.runtime for p in big} == {7200.0}


def test_adding_a_workload_leaves_the_other_workloads_pods_alone() -> None:
    extra = (
        TINY
        + """  - name: more
    arrivals_per_hour: 3
    runtime: {distribution: fixed, value: 1h}
"""
    )
    before = [p for p in generate_pods(tiny(), 4) if p.workload == "small"]
    after = [p for p in generate_pods(parse_scenario(extra), 4) if p.workload == "small"]
    assert before == after


def test_the_daily_swing_puts_more_arrivals_near_the_peak_hour() -> None:
    text = """
duration: 1d
nodes: [{name: n, count: 1, gpus: 1}]
workloads:
  - {name: w, arrivals_per_hour: 40, daily_swing: 0.9, peak_hour: 12,
     runtime: {distribution: fixed, value: 1h}}
"""
    hours = [int(p.time // 3600) for p in generate_pods(parse_scenario(text), 9)]
    around_noon = sum(1 for h in hours if 9 <= h < 15)
    around_midnight = sum(1 for h in hours if h < 3 or h >= 21)
    assert around_noon > 3 * around_midnight


def test_the_webhook_patch_is_applied_without_touching_the_original() -> None:
    original = {"spec": {"containers": [{"name": "a", "resources": {"limits": {"x": "1"}}}]}}
    patched = apply_patch(
        original,
        [
            {"op": "add", "path": "/spec/schedulerName", "value": "vgpu-scheduler"},
            {
                "op": "add",
                "path": "/spec/containers/0/resources/limits/nvidia.com~1gpucores",
                "value": "100",
            },
            {"op": "add", "path": "/spec/containers/0/env", "value": [{"name": "A", "value": "1"}]},
            {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "B", "value": "2"}},
        ],
    )
    assert patched["spec"]["schedulerName"] == "vgpu-scheduler"
    container = patched["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"x": "1", "nvidia.com/gpucores": "100"}
    assert [e["name"] for e in container["env"]] == ["A", "B"]
    assert original == {
        "spec": {"containers": [{"name": "a", "resources": {"limits": {"x": "1"}}}]}
    }


def test_the_progress_bar_redraws_in_place_and_ends_the_line() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream, "sim", enabled=True, width=10)
    for fraction in (0.0, 0.004, 0.5, 1.0):
        bar.update(fraction)
    bar.close()
    assert stream.getvalue() == (
        "\rsim [..........]   0%\rsim [#####.....]  50%\rsim [##########] 100%\n"
    )


def test_a_disabled_progress_bar_writes_nothing() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream, "sim", enabled=False)
    bar.update(0.5)
    bar.close()
    assert stream.getvalue() == ""


def test_durations_read_well() -> None:
    assert [duration(s) for s in (0.2, 45, 600, 9000)] == ["0s", "45s", "10m", "2.5h"]


def test_a_workload_can_start_later() -> None:
    text = """
duration: 4h
nodes: [{name: n, count: 1, gpus: 1}]
workloads:
  - {name: early, arrivals_per_hour: 20, start: 0, runtime: {distribution: fixed, value: 1h}}
  - {name: late, arrivals_per_hour: 20, start: 3h, runtime: {distribution: fixed, value: 1h}}
"""
    pods = generate_pods(parse_scenario(text), 2)
    assert min(p.time for p in pods if p.workload == "early") < 3600
    assert min(p.time for p in pods if p.workload == "late") >= 3 * 3600
