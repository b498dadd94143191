"""The chart's DRA mode (dra.enabled): valid objects for Kubernetes 1.34 and 1.36, the DRA
driver and the device plugin kept on disjoint nodes with one monitor on each GPU node, the
webhook's two modes splitting the namespaces between them, and the settings reaching the
processes as they read them."""

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.deploy.render import (
    DEVICE_PLUGIN,
    MONITOR,
    REPO,
    containers,
    helm,
    notes,
    one,
    schema_errors,
    template,
    template_args,
)
from tests.e2e.deploy.test_webhook_match import evaluate
from vgpu.app.cli import parse
from vgpu.app.scheduler.config import SchedulerConfig, load_config
from vgpu.app.scheduler.container import SchedulerContainer

DRA = ("dra.enabled=true",)
DRIVER, DRA_MONITOR = "vgpu-dra-driver", "vgpu-dra-monitor"


def pod_spec(owner: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = owner["spec"]["template"]["spec"]
    return spec


def runs_on(spec: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether the kube-scheduler would let the pod onto a node with these labels (its node
    selector and required node affinity; taints aside)."""
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    node = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []
    return not terms or any(
        all(_matches(e, labels) for e in term.get("matchExpressions", [])) for term in terms
    )


def _matches(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    value, operator = labels.get(expression["key"]), expression["operator"]
    if operator == "In":
        return value in expression["values"]
    if operator == "NotIn":
        return value not in expression["values"]
    return (value is not None) == (operator == "Exists")


@pytest.mark.parametrize("version", ["1.34.0", "1.36.0"])
@pytest.mark.parametrize(
    "settings",
    [DRA, (*DRA, "dra.webhook.namespaces=all", "metrics.secure.enabled=true")],
    ids=["dra", "dra-everywhere"],
)
def test_every_object_of_dra_mode_is_valid_for_1_34_and_1_36(
    version: str, settings: tuple[str, ...]
) -> None:
    objects = template(set_values=settings, kube_version=version)
    kinds = {o["kind"] for o in objects}
    assert {"DeviceClass", "DaemonSet", "ValidatingAdmissionPolicy"} <= kinds
    assert schema_errors(objects, (version.rpartition(".")[0],)) == []


def test_dra_mode_before_kubernetes_1_34_is_refused_with_the_reason() -> None:
    result = helm(*template_args(set_values=DRA, kube_version="1.33.0"))
    assert result.returncode != 0
    assert "dra.enabled needs Kubernetes 1.34 or later" in result.stderr


@pytest.mark.parametrize(
    ("version", "given", "expected"),
    [
        ("1.35.0", "auto", None),  # alpha and off: the API server would drop it
        ("1.36.0", "auto", "nvidia.com/gpu"),
        ("1.36.0", "", None),
        ("1.34.0", "example.com/gpu", "example.com/gpu"),
    ],
)
def test_the_device_class_maps_the_extended_resource_where_the_cluster_serves_it(
    version: str, given: str, expected: str | None
) -> None:
    settings = (*DRA, f"dra.extendedResourceName={given}")
    device_class = one(template(set_values=settings, kube_version=version), "DeviceClass")
    assert device_class["metadata"]["name"] == "gpu.vgpu.io"
    assert device_class["spec"]["selectors"] == [
        {"cel": {"expression": 'device.driver == "gpu.vgpu.io"'}}
    ]
    assert device_class["spec"].get("extendedResourceName") == expected


NODES = {
    "plugin-node": {"gpu": "on"},
    "dra-node": {"gpu": "on", "vgpu.io/gpu-mode": "dra"},
    "dra-only-label": {"vgpu.io/gpu-mode": "dra"},
    "cpu-node": {},
}


def placements(objects: list[dict[str, Any]]) -> dict[str, set[str]]:
    return {
        name: {
            n
            for n, labels in NODES.items()
            if runs_on(pod_spec(one(objects, "DaemonSet", name)), labels)
        }
        for name in (DEVICE_PLUGIN, MONITOR, DRIVER, DRA_MONITOR)
    }


def test_the_driver_and_the_device_plugin_never_share_a_node_and_each_gpu_node_has_one_monitor() -> (
    None
):
    assert placements(template(set_values=DRA)) == {
        DEVICE_PLUGIN: {"plugin-node"},
        MONITOR: {"plugin-node"},
        DRIVER: {"dra-node", "dra-only-label"},
        DRA_MONITOR: {"dra-node", "dra-only-label"},
    }


def test_the_device_plugins_own_node_affinity_keeps_its_terms_and_loses_the_dra_nodes(
    tmp_path: Path,
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        "dra: {enabled: true}\n"
        "devicePlugin:\n  affinity:\n    nodeAffinity:\n"
        "      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n"
        "          - matchExpressions: [{key: nfd/pci-10de.present, operator: In, values: ['true']}]\n"
        "          - matchExpressions: [{key: gfd/gpu.present, operator: Exists}]\n"
        "    podAntiAffinity: {}\n"
    )
    spec = pod_spec(one(template(values), "DaemonSet", DEVICE_PLUGIN))

    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    away = {"key": "vgpu.io/gpu-mode", "operator": "NotIn", "values": ["dra"]}
    assert [t["matchExpressions"][-1] for t in terms["nodeSelectorTerms"]] == [away, away]
    assert "podAntiAffinity" in spec["affinity"]
    assert runs_on(spec, {"gpu": "on", "gfd/gpu.present": "1"})
    assert not runs_on(spec, {"gpu": "on", "gfd/gpu.present": "1", "vgpu.io/gpu-mode": "dra"})


def test_the_driver_mounts_the_host_paths_it_is_told_and_its_flags_parse() -> None:
    settings = (*DRA, "global.gpuHookPath=/opt/hami", "dra.kubeletDir=/var/lib/k0s/kubelet")
    objects = template(set_values=settings)
    daemonset = one(objects, "DaemonSet", DRIVER)
    driver = containers(daemonset)["dra-driver"]
    parsed = parse(driver["args"])
    assert parsed.driver_name == "gpu.vgpu.io"
    assert str(parsed.registry_dir) == "/var/lib/k0s/kubelet/plugins_registry"
    assert str(parsed.plugin_dir) == "/var/lib/k0s/kubelet/plugins/gpu.vgpu.io"
    assert (str(parsed.cdi_dir), parsed.hook_path) == ("/var/run/cdi", "/opt/hami")
    # the device plugin's state dir: its served record counts the pods it served there
    plugin = containers(one(objects, "DaemonSet", DEVICE_PLUGIN))["device-plugin"]
    plugin_state = next(m for m in plugin["volumeMounts"] if m["name"] == "state")["mountPath"]
    assert str(parsed.state_dir) == plugin_state
    hosts = {v["name"]: v["hostPath"]["path"] for v in pod_spec(daemonset)["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in driver["volumeMounts"]}
    for name in ("registry", "plugin", "cdi", "lib", "state", "vgpulock"):
        assert hosts[name] == mounts[name]  # the same paths inside: the CDI specs name them
    assert hosts["lib"] == "/opt/hami/vgpu"
    assert "hami-core" in containers(daemonset)  # HAMi-core copied onto the DRA nodes too
    monitor = containers(one(objects, "DaemonSet", DRA_MONITOR))["vgpu-monitor"]
    assert str(parse(monitor["args"]).claims_dir) == "/opt/hami/vgpu/claims"
    assert pod_spec(one(objects, "DaemonSet", DRA_MONITOR))["serviceAccountName"] == MONITOR


def test_the_dra_monitor_is_scraped_through_the_monitors_service() -> None:
    objects = template(set_values=DRA)
    service = one(objects, "Service", "vgpu-device-plugin-monitor")
    labels = one(objects, "DaemonSet", DRA_MONITOR)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    dra_only = template(set_values=(*DRA, "devicePlugin.enabled=false"))
    daemonsets = {o["metadata"]["name"] for o in dra_only if o["kind"] == "DaemonSet"}
    assert daemonsets == {DRIVER, DRA_MONITOR}
    assert one(dra_only, "Service", "vgpu-device-plugin-monitor")


def webhooks(settings: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    config = one(template(set_values=settings), "MutatingWebhookConfiguration")
    return {hook["clientConfig"]["service"]["path"]: hook for hook in config["webhooks"]}


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items()) and all(
        _matches(e, labels) for e in selector.get("matchExpressions") or []
    )


NAMESPACES = {
    "team": {},
    "dra-team": {"vgpu.io/gpu-mode": "dra"},
    "ignored": {"hami.io/webhook": "ignore", "vgpu.io/gpu-mode": "dra"},
}


@pytest.mark.parametrize(
    ("namespaces", "expected"),
    [
        ("labelled", {"team": ["/webhook"], "dra-team": ["/webhook/dra"], "ignored": []}),
        ("all", {"team": ["/webhook/dra"], "dra-team": ["/webhook/dra"], "ignored": []}),
    ],
)
def test_each_namespace_is_sent_to_one_mode_of_the_webhook(
    namespaces: str, expected: dict[str, list[str]]
) -> None:
    hooks = webhooks((*DRA, f"dra.webhook.namespaces={namespaces}"))
    found = {
        namespace: [p for p, hook in hooks.items() if selects(hook["namespaceSelector"], labels)]
        for namespace, labels in NAMESPACES.items()
    }
    assert found == expected
    dra = hooks["/webhook/dra"]
    assert dra["sideEffects"] == "NoneOnDryRun"  # it makes templates, never on a dry run
    spec = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpumem": 1000}}}]}
    assert evaluate(dra["matchConditions"][0]["expression"], {"object": {"spec": spec}})


def test_both_entries_reach_routes_the_scheduler_serves() -> None:
    container = SchedulerContainer(config=SchedulerConfig())
    container.fake_cluster_file.override(REPO / "examples" / "fake-cluster.yaml")
    served = {getattr(route, "path", "") for route in container.webhook_app().routes}
    assert set(webhooks(DRA)) == {"/webhook", "/webhook/dra"} <= served


def test_without_the_translation_every_namespace_keeps_the_device_plugin_mode() -> None:
    hooks = webhooks((*DRA, "dra.webhook.enabled=false"))
    assert list(hooks) == ["/webhook"]
    assert selects(hooks["/webhook"]["namespaceSelector"], NAMESPACES["dra-team"])


def test_the_scheduler_reads_the_claims_settings_and_may_make_templates(tmp_path: Path) -> None:
    settings = (*DRA, "dra.driverName=gpu.example.com", "dra.deviceClassName=shared-gpus")
    objects = template(set_values=settings)
    path = tmp_path / "scheduler.yaml"
    path.write_text(one(objects, "ConfigMap", "vgpu-scheduler")["data"]["scheduler.yaml"])
    config = load_config(path, env={})
    assert (config.dra.driver_name, config.dra.device_class) == ("gpu.example.com", "shared-gpus")
    role = one(objects, "ClusterRole", "vgpu-scheduler-dra")
    assert {(r["resources"][0], v) for r in role["rules"] for v in r["verbs"]} == {
        ("resourceslices", "list"),
        ("resourceclaimtemplates", "get"),
        ("resourceclaimtemplates", "create"),
    }
    assert not [o for o in template() if o["metadata"]["name"] == "vgpu-scheduler-dra"]


def test_the_notes_name_the_version_the_gates_and_the_labels() -> None:
    text = notes(set_values=DRA)
    assert "Kubernetes 1.34 or later" in text
    assert "DRAConsumableCapacity in kube-apiserver, kube-scheduler and the DRA nodes'" in text
    assert "kubectl label node NODE vgpu.io/gpu-mode=dra" in text
    assert "kubectl label namespace NAMESPACE vgpu.io/gpu-mode=dra" in text
    assert "DRA mode" not in notes()


def test_a_dra_node_selector_of_two_labels_is_refused() -> None:
    result = helm(*template_args(set_values=(*DRA, "dra.nodeSelector.a=x", "dra.nodeSelector.b=y")))
    assert result.returncode != 0 and "nodeSelector" in result.stderr
