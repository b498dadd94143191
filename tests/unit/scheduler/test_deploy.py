"""The manifests in deploy/scheduler agree with the service: verbs, names, ports, resources."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.scheduler.builders import world
from vgpu.app.scheduler.config import load_config
from vgpu.app.scheduler.http import extender_app, webhook_app
from vgpu.app.scheduler.metrics import SchedulerMetrics

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "scheduler"


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def by_kind(name: str, kind: str) -> list[dict[str, Any]]:
    return [d for d in documents(name) if d["kind"] == kind]


def routes() -> set[str]:
    """Paths served by the extender and webhook listeners."""
    w = world()
    metrics = SchedulerMetrics(w.state, w.config.vendor(), lambda: True)
    apps = [extender_app(w.service, metrics), webhook_app(w.service, metrics, str)]
    return {getattr(r, "path", "") for app in apps for r in app.routes}


def test_every_file_the_kustomization_names_exists() -> None:
    kustomization = documents("kustomization.yaml")[0]
    named = list(kustomization["resources"])
    for generator in kustomization["configMapGenerator"]:
        named += [f.split("=", 1)[1] for f in generator["files"]]
    for name in named:
        assert (DEPLOY / name).is_file(), name


@pytest.mark.parametrize(
    ("name", "verbs"),
    [
        ("kube-scheduler-config.yaml", {"filter", "prioritize", "bind"}),
        ("kube-scheduler-config-single-node.yaml", {"filter", "bind"}),
    ],
)
def test_the_extender_stanza_matches_the_service(name: str, verbs: set[str]) -> None:
    [config] = documents(name)
    settings = load_config(DEPLOY / "vgpu-scheduler.yaml")
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert [p["schedulerName"] for p in config["profiles"]] == [settings.scheduler_name]
    [extender] = config["extenders"]
    used = {extender[k] for k in ("filterVerb", "prioritizeVerb", "bindVerb") if k in extender}
    assert used == verbs
    assert {f"/{verb}" for verb in used} <= routes()
    assert extender["nodeCacheCapable"] is True and extender["enableHTTPS"] is True
    vendor = settings.vendor()
    managed = {r["name"]: r["ignoredByScheduler"] for r in extender["managedResources"]}
    assert managed == dict.fromkeys([*vendor.resources, vendor.priority_resource], True)
    [service] = by_kind("deployment.yaml", "Service")
    host = f"https://{service['metadata']['name']}.{service['metadata']['namespace']}.svc:443"
    assert extender["urlPrefix"] == host


def test_the_deployment_serves_tls_on_the_configured_port() -> None:
    settings = load_config(DEPLOY / "vgpu-scheduler.yaml")
    assert settings.combine_scores is True  # paired with the prioritize configuration
    [deployment] = by_kind("deployment.yaml", "Deployment")
    vgpu = next(
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "vgpu"
    )
    assert vgpu["ports"][0]["containerPort"] == settings.listen_port
    assert vgpu["readinessProbe"]["httpGet"]["path"] == "/readyz"
    mounts = {m["mountPath"] for m in vgpu["volumeMounts"]}
    assert settings.tls_cert is not None and str(settings.tls_cert.parent) in mounts


def test_the_webhook_points_at_the_service_and_accepts_both_review_versions() -> None:
    [webhook] = documents("webhook.yaml")[0]["webhooks"]
    [service] = by_kind("deployment.yaml", "Service")
    assert set(webhook["admissionReviewVersions"]) == {"v1", "v1beta1"}
    target = webhook["clientConfig"]["service"]
    assert target["path"] == "/webhook" and "/webhook" in routes()
    assert (target["name"], target["namespace"]) == (
        service["metadata"]["name"],
        service["metadata"]["namespace"],
    )
    assert webhook["rules"][0]["operations"] == ["CREATE"]
    assert webhook["rules"][0]["resources"] == ["pods"]


def test_rbac_grants_what_the_service_calls() -> None:
    rules = by_kind("rbac.yaml", "ClusterRole")[0]["rules"]
    granted = {(r, v) for rule in rules for r in rule["resources"] for v in rule["verbs"]}
    for need in [
        ("pods", "patch"),
        ("pods", "watch"),
        ("nodes", "patch"),
        ("pods/binding", "create"),
        ("resourcequotas", "watch"),
        ("events", "create"),
    ]:
        assert need in granted
    leases = by_kind("rbac.yaml", "Role")[0]["rules"]
    assert any("leases" in r["resources"] and "update" in r["verbs"] for r in leases)
