"""`vgpu explain` as a process: against the Kubernetes API emulator through a kubeconfig, and
offline; both must print the golden reports, and the cluster must see reads only."""

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.k8s_emulator import RunningApiServer, node_manifest, quota_manifest
from tests.e2e.scheduler.harness import REPO
from vgpu.domain import NVIDIA, Device, encode_node_devices

CASES = REPO / "tests" / "unit" / "explain" / "cases"
GOLDEN = [("saturated", "saturated"), ("quota", "quota"), ("type", "type")]


def vgpu(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vgpu.app.cli", "explain", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
    )


def load_case(api: RunningApiServer, cluster: str) -> None:
    """The offline cluster file's nodes, quotas and pods, created through the API."""
    spec: dict[str, Any] = yaml.safe_load((CASES / f"{cluster}.yaml").read_text())
    for node in spec.get("nodes", []):
        annotations = {}
        if node.get("gpus"):
            devices = [
                Device(g["uuid"], i, g["type"], g.get("count", 10), g["memory"])
                for i, g in enumerate(node["gpus"])
            ]
            annotations[NVIDIA.register_annotation] = encode_node_devices(devices)
        api.create("/api/v1/nodes", node_manifest(node["name"], annotations))
    for quota in spec.get("quotas", []):
        namespace = quota["namespace"]
        api.create(
            f"/api/v1/namespaces/{namespace}/resourcequotas",
            quota_manifest(namespace, quota["name"], quota["hard"]),
        )
    for pod in spec.get("pods", []):
        namespace = pod["metadata"]["namespace"]
        api.create(
            f"/api/v1/namespaces/{namespace}/pods", {"apiVersion": "v1", "kind": "Pod", **pod}
        )


def writes(api: RunningApiServer) -> int:
    return sum(len(api.requests(method)) for method in ("POST", "PUT", "PATCH", "DELETE"))


@pytest.mark.parametrize(("case", "golden"), GOLDEN)
def test_against_the_api_the_report_matches_the_golden_file(
    k8s_api: RunningApiServer, tmp_path: Path, case: str, golden: str
) -> None:
    load_case(k8s_api, f"{case}-cluster")
    kubeconfig = k8s_api.kubeconfig(tmp_path / "kubeconfig")
    before = writes(k8s_api)
    done = vgpu("-f", str(CASES / f"{case}-pod.yaml"), "--kubeconfig", str(kubeconfig))
    assert (done.returncode, done.stderr) == (1, "")
    assert done.stdout == (CASES / f"{golden}.golden").read_text()
    assert writes(k8s_api) == before


def test_a_pending_pod_in_the_cluster_is_explained_by_name(
    k8s_api: RunningApiServer, tmp_path: Path
) -> None:
    load_case(k8s_api, "quota-cluster")
    pod = yaml.safe_load((CASES / "quota-pod.yaml").read_text())
    k8s_api.create("/api/v1/namespaces/team-a/pods", {"apiVersion": "v1", "kind": "Pod", **pod})
    kubeconfig = k8s_api.kubeconfig(tmp_path / "kubeconfig")
    done = vgpu("team-a/analysis", "--kubeconfig", str(kubeconfig), "--json")
    assert done.returncode == 1, done.stderr
    report = yaml.safe_load(done.stdout)
    assert report["pod"] == "team-a/analysis"
    assert [g["label"] for g in report["groups"]] == ["over namespace quota"]
    assert {s["change"] for s in report["suggestions"]} == {"memory", "quota", "wait"}


def test_an_unreachable_cluster_is_a_clear_error(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        '{"apiVersion": "v1", "kind": "Config", "current-context": "x",'
        ' "clusters": [{"name": "x", "cluster": {"server": "http://127.0.0.1:9"}}],'
        ' "users": [{"name": "x", "user": {}}],'
        ' "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}]}'
    )
    done = vgpu("default/p", "--kubeconfig", str(kubeconfig))
    assert done.returncode == 2
    assert done.stderr.startswith("vgpu explain: ") and "Traceback" not in done.stderr


@pytest.mark.parametrize(("case", "golden"), GOLDEN)
def test_offline_the_report_matches_the_golden_file(case: str, golden: str) -> None:
    done = vgpu(
        "-f", str(CASES / f"{case}-pod.yaml"), "--fake-cluster", str(CASES / f"{case}-cluster.yaml")
    )
    assert (done.returncode, done.stderr) == (1, "")
    assert done.stdout == (CASES / f"{golden}.golden").read_text()
