"""Who can read /metrics, in the chart: secure metrics (HTTPS, TokenReview, SubjectAccessReview)
and the NetworkPolicy, each off by default and complete when on."""

from pathlib import Path
from typing import Any

from tests.e2e.deploy.render import (
    HAMI_VALUES,
    MONITOR,
    containers,
    helm,
    notes,
    one,
    render_errors,
    template,
    template_args,
)
from vgpu.app.cli import parse
from vgpu.app.scheduler.config import load_config

MONITORING = ("monitoring.coreos.com/v1",)
SECURE = (
    "metrics.secure.enabled=true",
    "metrics.secure.readers[0].kind=ServiceAccount",
    "metrics.secure.readers[0].name=prometheus-k8s",
    "metrics.secure.readers[0].namespace=monitoring",
    "serviceMonitor.enabled=true",
)
FENCED = (
    "metrics.networkPolicy.enabled=true",
    "metrics.networkPolicy.from[0].namespaceSelector.matchLabels.team=observability",
)


def _named(objects: list[dict[str, Any]], kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in objects if o["kind"] == kind}


def _selects(policy: dict[str, Any], owner: dict[str, Any]) -> bool:
    """Whether the policy's podSelector picks the pods `owner` runs, by their rendered labels."""
    labels = owner["spec"]["template"]["metadata"]["labels"]
    return bool(policy["podSelector"]["matchLabels"].items() <= labels.items())


def test_by_default_metrics_are_plain_and_nothing_about_them_is_rendered() -> None:
    objects = template(HAMI_VALUES, api_versions=MONITORING)

    assert not _named(objects, "NetworkPolicy")
    assert not {n for n in _named(objects, "ClusterRole") if "metrics" in n}
    monitor = containers(one(objects, "DaemonSet", MONITOR))["vgpu-monitor"]
    assert "--secure-metrics" not in monitor["args"]
    assert monitor["readinessProbe"]["httpGet"]["scheme"] == "HTTP"


def test_secure_metrics_reach_both_listeners_their_scrapers_and_rbac(tmp_path: Path) -> None:
    objects = template(set_values=SECURE, api_versions=MONITORING)

    path = tmp_path / "scheduler.yaml"
    path.write_text(one(objects, "ConfigMap", "vgpu-scheduler")["data"]["scheduler.yaml"])
    secure = load_config(path, env={}).metrics.secure
    assert (secure.enabled, str(secure.cert_dir)) == (True, "/metrics-tls")
    scheduler = containers(one(objects, "Deployment"))["vgpu"]
    assert {"name": "metrics-tls", "mountPath": "/metrics-tls"} in scheduler["volumeMounts"]

    monitors = one(objects, "DaemonSet", MONITOR)
    monitor = containers(monitors)["vgpu-monitor"]
    assert getattr(parse(monitor["args"]), "secure_metrics.enabled") is True
    assert {"name": "VGPU_SECURE_METRICS__CERT_DIR", "value": "/metrics-tls"} in monitor["env"]
    assert {"name": "metrics-tls", "mountPath": "/metrics-tls"} in monitor["volumeMounts"]
    assert monitor["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    pod = monitors["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["metrics-tls"]["emptyDir"]["medium"] == "Memory"

    for name in ("vgpu-scheduler", "vgpu-device-plugin-monitor"):
        endpoint = one(objects, "ServiceMonitor", name)["spec"]["endpoints"][0]
        assert endpoint["scheme"] == "https"
        assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"

    auth = one(objects, "ClusterRole", "vgpu-metrics-auth")
    assert {(r["apiGroups"][0], r["resources"][0], tuple(r["verbs"])) for r in auth["rules"]} == {
        ("authentication.k8s.io", "tokenreviews", ("create",)),
        ("authorization.k8s.io", "subjectaccessreviews", ("create",)),
    }
    bound = one(objects, "ClusterRoleBinding", "vgpu-metrics-auth")["subjects"]
    # the accounts the two listeners run under: the monitor's own, not the plugin's
    assert {s["name"] for s in bound} == {
        one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"],
        pod["serviceAccountName"],
    } == {"vgpu-scheduler", MONITOR}
    reader = one(objects, "ClusterRole", "vgpu-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    readers = one(objects, "ClusterRoleBinding", "vgpu-metrics-reader")
    assert readers["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}
    ]
    assert render_errors(set_values=SECURE) == []


def test_the_network_policy_admits_the_metrics_ports_only_from_the_peers_named() -> None:
    objects = template(set_values=FENCED)
    peers = [{"namespaceSelector": {"matchLabels": {"team": "observability"}}}]

    scheduler = one(objects, "NetworkPolicy", "vgpu-scheduler-metrics")["spec"]
    assert _selects(scheduler, one(objects, "Deployment"))
    assert scheduler["policyTypes"] == ["Ingress"]
    assert scheduler["ingress"] == [
        {"from": peers, "ports": [{"port": "metrics", "protocol": "TCP"}]},
        {"ports": [{"port": "webhook", "protocol": "TCP"}]},  # the API server: from anywhere
    ]
    monitor = one(objects, "NetworkPolicy", "vgpu-monitor-metrics")["spec"]
    assert _selects(monitor, one(objects, "DaemonSet", MONITOR))
    assert not _selects(monitor, one(objects, "DaemonSet", "vgpu-device-plugin"))
    assert monitor["ingress"] == [
        {"from": peers, "ports": [{"port": "monitorport", "protocol": "TCP"}]}
    ]
    ports = {
        p["name"]
        for owner in objects
        if owner["kind"] in ("Deployment", "DaemonSet")
        for c in containers(owner).values()
        for p in c.get("ports", [])
    }
    assert {"metrics", "webhook", "monitorport"} <= ports  # the names the policies use
    assert render_errors(set_values=FENCED) == []


def test_a_network_policy_that_would_admit_no_scraper_is_refused_with_the_reason() -> None:
    result = helm(*template_args(set_values=("metrics.networkPolicy.enabled=true",)))

    assert result.returncode != 0
    assert "metrics.networkPolicy.from is empty: no scraper could reach /metrics" in result.stderr


def test_an_unknown_key_under_metrics_is_refused() -> None:
    result = helm(*template_args(set_values=("metrics.secure.enable=true",)))

    assert result.returncode != 0
    assert "enable" in result.stderr


def test_the_notes_say_whom_to_bind_when_no_reader_is_named(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text("metrics:\n  secure:\n    enabled: true\n")
    named = tmp_path / "named.yaml"
    named.write_text(
        "metrics:\n  secure:\n    enabled: true\n    readers:\n"
        "      - {kind: ServiceAccount, name: prometheus-k8s, namespace: monitoring}\n"
    )

    assert "Bind your Prometheus's service account to the ClusterRole\nvgpu-metrics-reader" in (
        notes(values)
    )
    assert "Secure metrics are on" in notes(named)
    assert "Bind your Prometheus" not in notes(named)
    assert "Secure metrics" not in notes()
