"""Big data files (fake clusters, scenarios) read as JSON or YAML with the same result."""

import json
from pathlib import Path

import pytest
import yaml

from vgpu.app.errors import ConfigError
from vgpu.app.fake_mode import FakeClusterError, load_fake_cluster
from vgpu.app.mapping_file import read_mapping_streaming
from vgpu.app.settings import parse_yaml_mapping, read_yaml_mapping
from vgpu.app.simulate.scenario import default_scenario_text, parse_scenario
from vgpu.domain import NVIDIA

CLUSTER = {
    "nodes": [
        {"name": "n1", "gpus": [{"uuid": "GPU-1", "type": "NVIDIA L4", "memory": 24000}]},
        {"name": "cpu-only"},
    ]
}


def test_json_and_yaml_of_the_same_data_read_alike() -> None:
    as_json = parse_yaml_mapping(json.dumps(CLUSTER), "f")
    as_yaml = parse_yaml_mapping(yaml.safe_dump(CLUSTER), "f")
    assert as_json == as_yaml == CLUSTER


def test_a_yaml_flow_mapping_is_not_mistaken_for_json() -> None:
    assert parse_yaml_mapping("{nodes: [], note: yes}", "f") == {"nodes": [], "note": True}


def test_empty_text_is_an_empty_mapping() -> None:
    assert parse_yaml_mapping("", "f") == {}


@pytest.mark.parametrize(
    ("text", "wording"),
    [("{nodes: [", "f: not valid YAML"), ("- a\n- b\n", "f: must be a YAML mapping, not list")],
)
def test_bad_text_is_reported_with_its_source(text: str, wording: str) -> None:
    with pytest.raises(ConfigError, match=wording):
        parse_yaml_mapping(text, "f")


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"fake cluster file .*missing\.json"):
        read_yaml_mapping(tmp_path / "missing.json", "fake cluster file")


def test_a_fake_cluster_file_may_be_json(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(CLUSTER))
    cluster = load_fake_cluster(path, NVIDIA)
    node = cluster.get_node("n1")
    assert node is not None and "GPU-1" in node.annotations[NVIDIA.register_annotation]
    assert cluster.get_node("cpu-only") is not None


def test_a_scenario_may_be_json() -> None:
    data = yaml.safe_load(default_scenario_text())
    assert parse_scenario(json.dumps(data)) == parse_scenario(default_scenario_text())


PODS = [
    {"metadata": {"name": "a", "annotations": {"x": '[1, {"]": 2}]'}}},
    {"metadata": {"name": "b"}, "spec": {"nodeName": "n1"}},
]


@pytest.mark.parametrize("pods_first", [True, False])
@pytest.mark.parametrize("dump", [lambda d: json.dumps(d, indent=1), json.dumps, yaml.safe_dump])
def test_a_streamed_list_reads_as_the_whole_file_does(
    tmp_path: Path, pods_first: bool, dump: object
) -> None:
    data = {"pods": PODS, **CLUSTER} if pods_first else {**CLUSTER, "pods": PODS, "quotas": []}
    path = tmp_path / "cluster"
    path.write_text(dump(data))  # type: ignore[operator]
    rest, pods = read_mapping_streaming(path, "f", "pods")
    assert list(pods) == PODS
    assert rest == {k: v for k, v in data.items() if k != "pods"}


def test_a_member_that_is_not_a_list_is_left_in_the_mapping(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"pods": "none", "nodes": []}))
    rest, pods = read_mapping_streaming(path, "f", "pods")
    assert rest == {"pods": "none", "nodes": []} and list(pods) == []


def test_broken_json_is_still_reported_with_its_source(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text('{"nodes": [], "pods": [{"metadata": {]}')
    with pytest.raises(ConfigError, match=r"f .*cluster\.json: not valid YAML"):
        read_mapping_streaming(path, "f", "pods")


def test_a_fake_cluster_pod_that_is_not_a_mapping_is_named(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({**CLUSTER, "pods": [PODS[0], "oops"]}))
    with pytest.raises(FakeClusterError, match=r"pods\[1\]: must be a pod manifest"):
        load_fake_cluster(path, NVIDIA)


def test_a_fake_cluster_json_file_holds_its_pods(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({**CLUSTER, "pods": PODS}))
    cluster = load_fake_cluster(path, NVIDIA)
    assert sorted(p.name for p in cluster.list_pods()) == ["a", "b"]
    assert [p.name for p in cluster.list_pods(node_name="n1")] == ["b"]
