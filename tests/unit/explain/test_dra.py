"""`vgpu explain` for a pod whose devices come from DRA claims: offline on the example files,
templates, a missing claim, unreadable objects; and the API reader's paging."""

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from vgpu.adapters.kubernetes.dra_reader import KubernetesDraReader
from vgpu.app.cli import main
from vgpu.ports.cluster import NotFound

EXAMPLES = Path(__file__).parents[3] / "examples" / "explain"
CLUSTER = yaml.safe_load((EXAMPLES / "dra-cluster.yaml").read_text())
POD = yaml.safe_load((EXAMPLES / "dra-pod.yaml").read_text())


def explain(
    capsys: pytest.CaptureFixture[str], pod: Path, cluster: Path, *more: str
) -> tuple[int, str, str]:
    code = main(["explain", "-f", str(pod), "--fake-cluster", str(cluster), *more])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _files(tmp_path: Path, cluster: dict[str, Any], pod: dict[str, Any]) -> tuple[Path, Path]:
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod))
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    return tmp_path / "pod.yaml", tmp_path / "cluster.yaml"


def test_the_example_reads_as_its_golden_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = explain(capsys, EXAMPLES / "dra-pod.yaml", EXAMPLES / "dra-cluster.yaml")
    assert (code, err) == (1, "")
    assert out == (Path(__file__).parent / "cases" / "dra.golden").read_text()


def test_json_names_every_node_and_the_changes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = explain(
        capsys, EXAMPLES / "dra-pod.yaml", EXAMPLES / "dra-cluster.yaml", "--json"
    )
    document = json.loads(out)
    assert code == 1 and document["claims"] == ["ml/train-gpu"]
    assert [n["reason"] for n in document["nodes"]] == ["insufficient capacity", "request selector"]
    assert document["suggestions"][0]["value"] == {"capacity": "memory", "amount": 10 * 2**30}


def test_a_pod_from_a_template_gets_the_claim_the_template_would_make(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = copy.deepcopy(CLUSTER)
    cluster["resourceClaimTemplates"] = [
        {
            "metadata": {"name": "small-gpu", "namespace": "ml"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": "gpu.vgpu.io",
                                    "capacity": {"requests": {"memory": "8Gi", "cores": 10}},
                                },
                            }
                        ]
                    }
                }
            },
        }
    ]
    pod = copy.deepcopy(POD)
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "small-gpu"}]
    code, out, err = explain(capsys, *_files(tmp_path, cluster, pod))
    assert (code, err) == (0, "")
    assert out.splitlines()[:2] == [
        "pod ml/train: its claims fit on 2/2 nodes, gpu-1 among them",
        "  would get on gpu-1: ml/train-gpu: gpu-1/gpu-0 (cores 10, memory 8Gi)",
    ]


def test_a_missing_claim_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = copy.deepcopy(POD)
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "nowhere"}]
    code, _, err = explain(capsys, *_files(tmp_path, CLUSTER, pod))
    assert code == 2
    assert err == "vgpu explain: pod ml/train: resource claim nowhere (gpu) not found\n"


def test_the_pods_own_claim_with_a_bad_field_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = copy.deepcopy(CLUSTER)
    cluster["resourceClaims"][1]["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {
        "requests": {"memory": "-20Gi"}
    }
    code, _, err = explain(capsys, *_files(tmp_path, cluster, POD))
    assert code == 2
    assert (
        "ResourceClaim ml/train-gpu: spec.devices.requests[0].exactly.capacity.requests.memory: "
        in err
    )
    assert "'-20Gi' is negative" in err


def test_another_pods_unreadable_claim_is_left_out_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = copy.deepcopy(CLUSTER)
    cluster["resourceClaims"][0]["status"]["allocation"]["devices"]["results"][0]["shareID"] = 7
    _, out, _ = explain(capsys, *_files(tmp_path, cluster, POD))
    lines = out.splitlines()
    assert lines[1].startswith("  left out: ResourceClaim ml/big-gpu: status.allocation.devices")
    assert "fit on 1/2 nodes" in lines[0]  # what it held is not counted


class _Pages:
    """A KubeApi stand-in answering list calls from pages (or 404)."""

    def __init__(self, pages: list[dict[str, Any]] | None) -> None:
        self.pages = pages
        self.queries: list[list[tuple[str, str]]] = []

    def get(self, path: str, query: list[tuple[str, str]]) -> dict[str, Any]:
        self.queries.append(list(query))
        if self.pages is None:
            raise NotFound(f"GET {path}: HTTP 404")
        return self.pages.pop(0)


def test_the_reader_follows_continue_tokens_and_reads_no_dra_as_nothing() -> None:
    reader = KubernetesDraReader.__new__(KubernetesDraReader)
    pages = _Pages(
        [
            {"items": [{"metadata": {"name": "a"}}], "metadata": {"continue": "t1"}},
            {"items": [{"metadata": {"name": "b"}}, "junk"], "metadata": {}},
        ]
    )
    reader._api = pages  # type: ignore[assignment]
    assert [d["metadata"]["name"] for d in reader.list_resource_slices()] == ["a", "b"]
    assert pages.queries == [[("limit", "500")], [("limit", "500"), ("continue", "t1")]]
    reader._api = _Pages(None)  # type: ignore[assignment]
    assert reader.list_device_classes() == []
