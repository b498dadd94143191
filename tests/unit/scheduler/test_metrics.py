"""`/metrics` as HAMi's dashboards and alerts read it: names, label sets, units, the zone
label, per-container series, legacy twins, and one copy of each series across replicas; and
every query of the shipped Grafana dashboards (allocation and usage) finds series in the
scheduler's and the monitor's metrics."""

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.unit.monitor.regionbytes import UUID_A, UUID_B, two_gpu_spec, v1_bytes
from tests.unit.scheduler.builders import World, gpu_node, manifest, world
from vgpu.adapters.fake.accounting import FakeAccounting
from vgpu.adapters.hamicore.layout import decode
from vgpu.app.monitor.metrics import MonitorMetrics, MonitorSources
from vgpu.app.scheduler.metrics import SchedulerMetrics
from vgpu.domain.pod import Container, Pod
from vgpu.ports.cluster import Quota
from vgpu.ports.gpu import GpuUsage

DASHBOARDS = sorted((Path(__file__).resolve().parents[3] / "charts" / "vgpu" / "dashboards").glob("*.json"))
MIB = 1 << 20


def running(w: World, body: dict[str, object], node: str) -> None:
    """A pod the scheduler placed (filter reserves its cards) and that now runs there."""
    result = w.filter(body, node)
    assert result.node_names == [node], result


def init_and_app_pod() -> dict[str, object]:
    body = manifest("train", namespace="ml", gpu=1, gpumem=4000, gpucores=30)
    spec = body["spec"]
    assert isinstance(spec, dict)
    spec["initContainers"] = [{
        "name": "warmup", "image": "cuda:12",
        "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}},
    }]
    return body


@pytest.fixture
def cluster() -> World:
    w = world(gpu_node("gpu-1", cards=2, memory=24000), gpu_node("gpu-2", cards=1),
              gpu_policy="binpack")
    w.cluster.put_quota(Quota("ml", "q", {"limits.nvidia.com/gpumem": "50000"}))
    running(w, init_and_app_pod(), "gpu-1")
    running(w, manifest("infer", gpu=1, gpumem=8000, gpucores=20), "gpu-1")
    return w


def scrape(w: World, leader: bool = True, legacy: bool = False) -> list[Sample]:
    metrics = SchedulerMetrics(w.state, w.config.vendor(), lambda: leader, legacy=legacy)
    return [
        s for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
    ]


def series(samples: list[Sample], name: str) -> list[Sample]:
    return [s for s in samples if s.name == name]


def test_card_metrics_carry_hami_label_sets_and_units(cluster: World) -> None:
    samples = scrape(cluster)
    card = {"node", "device_uuid", "device_index", "device_type", "zone"}
    for name in ("hami_gpu_memory_limit_bytes", "hami_gpu_core_limit_ratio",
                 "hami_gpu_shared_count", "hami_gpu_core_allocated_ratio",
                 "hami_node_gpu_memory_allocated_ratio"):
        found = series(samples, name)
        assert len(found) == 3, name
        assert all(set(s.labels) == card for s in found), name
    assert {s.labels["zone"] for s in samples if s.name.startswith("hami_gpu")} == {"vGPU"}
    [allocated] = [s for s in series(samples, "hami_gpu_memory_allocated_bytes") if s.value]
    assert set(allocated.labels) == card | {"device_cores"}
    assert allocated.value == (4000 + 8000) * MIB and allocated.labels["device_cores"] == "100"
    [overview] = [s for s in series(samples, "hami_node_gpu_overview") if s.value]
    assert overview.labels["device_memory_limit"] == "24000"
    assert overview.value == 12000 * MIB
    [ratio] = [s for s in series(samples, "hami_node_gpu_memory_allocated_ratio") if s.value]
    assert ratio.value == pytest.approx(12000 / 24000)
    assert max(s.value for s in series(samples, "hami_gpu_shared_count")) == 2


def test_container_series_are_indexed_init_containers_first(cluster: World) -> None:
    samples = series(scrape(cluster), "hami_vgpu_memory_allocated_bytes")
    train = {s.labels["container_index"]: s.value for s in samples if s.labels["pod"] == "train"}
    assert train == {"0": 1000 * MIB, "1": 4000 * MIB}
    [infer] = [s for s in samples if s.labels["pod"] == "infer"]
    assert set(infer.labels) == {"namespace", "node", "pod", "container_index", "device_uuid", "zone"}
    assert (infer.labels["namespace"], infer.labels["node"]) == ("default", "gpu-1")
    cores = series(scrape(cluster), "hami_vgpu_core_allocated_ratio")
    assert sorted(s.value for s in cores) == [0, 20, 30]


def test_quota_series_name_the_resource_and_the_limit(cluster: World) -> None:
    samples = scrape(cluster)
    [used] = series(samples, "hami_resource_quota_used")
    assert used.labels == {"namespace": "ml", "quota_name": "nvidia.com/gpumem",
                           "limit": "50000", "zone": "vGPU"}
    assert used.value == 4000  # the init container runs before, not beside, the app container
    [limit] = series(samples, "hami_resource_quota_limit")
    assert limit.value == 50000


def test_build_info_has_hami_labels_and_no_zone(cluster: World) -> None:
    [info] = series(scrape(cluster), "hami_build_info")
    assert set(info.labels) == {"version", "revision", "build_date", "go_version", "compiler",
                                "platform"}
    assert info.value == 1


def test_a_follower_publishes_no_allocation_series(cluster: World) -> None:
    samples = scrape(cluster, leader=False)
    assert {s.name for s in samples if s.name.startswith("hami_")} == {
        "hami_build_info", "hami_scheduler_is_leader", "hami_scheduler_cache_synced"
    }
    assert series(samples, "hami_scheduler_is_leader")[0].value == 0


def test_legacy_names_appear_only_when_switched_on(cluster: World) -> None:
    assert not series(scrape(cluster), "GPUDeviceMemoryLimit")
    samples = scrape(cluster, legacy=True)
    [limit, *_] = series(samples, "GPUDeviceMemoryLimit")
    assert set(limit.labels) == {"nodeid", "deviceuuid", "deviceidx", "devicetype", "zone"}
    containers = series(samples, "vGPUMemoryAllocated")
    assert set(containers[0].labels) == {"podnamespace", "nodename", "podname", "containeridx",
                                         "deviceuuid", "zone"}
    assert sorted(s.value for s in containers) == sorted(
        s.value for s in series(samples, "hami_vgpu_memory_allocated_bytes")
    )
    [ratio, *_] = series(samples, "nodeGPUMemoryPercentage")
    assert set(ratio.labels) == {"nodeid", "deviceuuid", "deviceidx", "zone"}
    assert series(samples, "QuotaUsed")[0].labels["quotanamespace"] == "ml"
    for name in ("GPUDeviceCoreLimit", "GPUDeviceMemoryAllocated", "GPUDeviceSharedNum",
                 "GPUDeviceCoreAllocated", "nodeGPUOverview", "vGPUCoreAllocated"):
        assert series(samples, name), name


# the dashboard ---------------------------------------------------------------------------------

_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?(\[[^\]]*\])?")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"')
_KEYWORDS = {"and", "or", "unless", "bool", "offset"}


def selectors(expr: str) -> Iterator[tuple[str, list[tuple[str, str, str]]]]:
    """Each metric selector in a PromQL expression: its name and its label matchers."""
    text = _GROUPING.sub(" ", expr.replace("$node", ".*").replace("$namespace", ".*"))
    for match in _SELECTOR.finditer(text):
        name, braces, _ = match.groups()
        following = text[match.end():].lstrip()[:1]
        if name in _KEYWORDS or following == "(":
            continue  # an operator or a function call
        yield name, _MATCHER.findall(braces or "")


def matches(sample: Sample, matchers: list[tuple[str, str, str]]) -> bool:
    for label, op, value in matchers:
        have = sample.labels.get(label, "")
        hit = re.fullmatch(value, have) is not None if "~" in op else have == value
        if hit == op.startswith("!"):
            return False
    return True


def dashboard_exprs(dashboard: Path) -> list[str]:
    """Every panel target's `expr` (rows included) and every query variable's query."""
    board = json.loads(dashboard.read_text())

    def targets(panels: list[dict[str, object]]) -> Iterator[str]:
        for panel in panels:
            for target in panel.get("targets") or []:  # type: ignore[attr-defined]
                yield target["expr"]
            yield from targets(panel.get("panels") or [])  # type: ignore[arg-type]

    variables = [v["query"]["query"] for v in board["templating"]["list"] if v["type"] == "query"]
    return [*targets(board["panels"]), *variables]


def test_the_selector_reader_sees_through_functions_and_groupings() -> None:
    found = list(selectors(
        'topk(10, sum by (namespace, pod) (hami_vgpu_memory_allocated_bytes{namespace=~"$namespace"}))'
        " / on (node) rate(x_total[5m])"
    ))
    assert found == [("hami_vgpu_memory_allocated_bytes", [("namespace", "=~", ".*")]),
                     ("x_total", [])]


class _Cards:
    """Two busy cards as NVML reports them."""

    def read_usage(self) -> list[GpuUsage]:
        return [GpuUsage(UUID_A, 0, "A100", 1522 * MIB, 40, 12),
                GpuUsage(UUID_B, 1, "A100", 2358 * MIB, 60, 20)]


def monitor_samples() -> list[Sample]:
    """What `vgpu monitor` on gpu-1 serves while a container uses both of its cards."""
    accounting = FakeAccounting()
    region = v1_bytes(two_gpu_spec())
    accounting.add("uid-1", "main", decode(region, len(region)))
    pod = Pod("ml", "train", uid="uid-1", labels={"hami.io/vgpu-node": "gpu-1"},
              containers=(Container("main"),), node_name="gpu-1")
    sources = MonitorSources(node="gpu-1", gpus=_Cards(), accounting=accounting,  # type: ignore[arg-type]
                             pods=lambda: [pod], clock=lambda: 1_760_000_042.5)
    text = MonitorMetrics(sources).render().decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


@pytest.mark.parametrize("dashboard", DASHBOARDS, ids=lambda path: path.stem)
def test_every_dashboard_query_finds_series_for_a_cluster_with_running_pods(
    cluster: World, dashboard: Path
) -> None:
    metrics = SchedulerMetrics(cluster.state, cluster.config.vendor(), lambda: True)
    metrics.latency.labels("filter").observe(0.01)  # as after one extender call
    samples = [
        s for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
    ] + monitor_samples()
    exprs = dashboard_exprs(dashboard)
    assert len(exprs) >= 15
    for expr in exprs:
        expr = re.sub(r"label_values\((\w+), *\w+\)", r"\1", expr)
        found = list(selectors(expr))
        assert found, expr
        for name, wanted in found:
            assert any(s.name == name and matches(s, wanted) for s in samples), (expr, name)


def test_label_values_and_help_are_escaped_for_the_text_format() -> None:
    from vgpu.app.scheduler.metrics import _Gauge

    gauge = _Gauge("g", 'help with \\ and\nnewline', ["a", "b"])
    gauge.add_metric(['quote " here', "back\\slash\nnew"], 2.5)
    [family] = text_string_to_metric_families(gauge.text())
    assert family.documentation == "help with \\ and\nnewline"
    [sample] = family.samples
    assert sample.labels == {"a": 'quote " here', "b": "back\\slash\nnew"}
    assert sample.value == 2.5
