"""charts/vgpu: lints, renders valid objects for every supported Kubernetes, and agrees with
the processes it runs (their routes, flags and settings files)."""

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.deploy.render import (
    CHART,
    DEVICE_PLUGIN,
    HAMI_VALUES,
    MONITOR,
    NAMESPACE,
    OPERATOR_OVERRIDES,
    containers,
    helm,
    one,
    render_errors,
    schema_errors,
    template,
)
from tests.unit.scheduler.builders import world
from vgpu.app.cli import parse
from vgpu.app.scheduler.config import (
    Fragmentation,
    SchedulerConfig,
    SeedShape,
    TypicalShape,
    load_config,
)
from vgpu.app.scheduler.http import extender_app, webhook_app
from vgpu.app.scheduler.metrics import SchedulerMetrics
from vgpu.app.scheduler.preempt import Preempter
from vgpu.domain import Policy
from vgpu.domain.handshake import HamiVersion

VARIANTS = {
    "default": ((), ()),
    "hami-values": ((HAMI_VALUES,), ()),
    "operator-overrides": ((OPERATOR_OVERRIDES,), ()),
    "hami-values-and-operator-overrides": ((HAMI_VALUES, OPERATOR_OVERRIDES), ()),
    "no-webhook-no-kube-scheduler": (
        (),
        ("scheduler.admissionWebhook.enabled=false", "scheduler.kubeScheduler.enabled=false"),
    ),
    "monitoring": ((), ("serviceMonitor.enabled=true", "dashboards.enabled=true")),
    "hami-v2.8-plugins": (
        (),
        ("scheduler.nodeHandshake.hamiVersion=v2.8", "scheduler.nodeHandshake.period=1m"),
    ),
}


def render(variant: str) -> list[dict[str, Any]]:
    """The variant rendered for a cluster that runs the Prometheus operator."""
    values, settings = VARIANTS[variant]
    return template(*values, set_values=settings, api_versions=("monitoring.coreos.com/v1",))


def scheduler_settings(objects: list[dict[str, Any]], tmp_path: Path) -> SchedulerConfig:
    """The scheduler's settings file loaded the way `vgpu scheduler --config` loads it."""
    path = tmp_path / "scheduler.yaml"
    path.write_text(one(objects, "ConfigMap", "vgpu-scheduler")["data"]["scheduler.yaml"])
    return load_config(path, env={})


def routes(app: str) -> set[str]:
    """Paths the `extender` or `webhook` listener serves."""
    w = world()
    metrics = SchedulerMetrics(w.state, w.config.vendor(), lambda: True)
    preempter = Preempter(w.state, w.config.scheduling(), w.cluster.list_pods)
    if app == "extender":
        return set(extender_app(w.service, metrics, preempter=preempter).paths)
    return {getattr(r, "path", "") for r in webhook_app(w.service, metrics, str).routes}


@pytest.mark.parametrize(
    "values",
    [(), (HAMI_VALUES,), (HAMI_VALUES, OPERATOR_OVERRIDES)],
    ids=["default", "hami-values", "hami-values-and-operator-overrides"],
)
def test_helm_lint_passes(values: tuple[Path, ...]) -> None:
    args = ["lint", str(CHART), "--strict"]
    for path in values:
        args += ["--values", str(path)]
    result = helm(*args)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_rendered_object_is_valid_for_the_oldest_and_newest_kubernetes(variant: str) -> None:
    values, settings = VARIANTS[variant]
    assert len(render(variant)) > 10
    assert render_errors(*values, set_values=settings) == []


def test_schema_validation_catches_a_misspelt_field() -> None:
    objects = render("default")
    deployment = one(objects, "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    assert any("imagePullPolicyy" in e for e in schema_errors([deployment]))


def test_the_node_handshake_follows_the_hami_release_the_values_name(tmp_path: Path) -> None:
    default = scheduler_settings(render("default"), tmp_path)
    assert (default.hami_version, default.handshake_period) == (HamiVersion.V2_10, 15)
    older = scheduler_settings(render("hami-v2.8-plugins"), tmp_path)
    assert (older.hami_version, older.handshake_period) == (HamiVersion.V2_8, 60)


FGD_VALUES = {
    "scheduler": {
        "defaultSchedulerPolicy": {"nodeSchedulerPolicy": "fgd", "gpuSchedulerPolicy": "fgd"},
        "fragmentation": {
            "window": 1_000_000,
            "refresh": 50,
            "coverage": 0.9,
            "tolerance": 0,
            "seedShapes": [
                {"gpus": 1, "memoryPercent": 46, "cores": 46, "weight": 5},
                {"gpus": 8, "memory": 81920, "cores": 100, "gputype": "A100", "weight": 1.5},
            ],
        },
    }
}


def test_fgd_and_its_fragmentation_settings_reach_the_scheduler_as_given(tmp_path: Path) -> None:
    values = tmp_path / "fgd.yaml"
    values.write_text(yaml.safe_dump(FGD_VALUES))
    settings = scheduler_settings(template(values), tmp_path)
    assert (settings.node_policy, settings.gpu_policy) == (Policy.FGD, "fgd")
    assert settings.fragmentation == Fragmentation(
        window=1_000_000,
        refresh=50,
        coverage=0.9,
        tolerance=0,
        seed_shapes=[
            SeedShape(gpus=1, memory_percent=46, cores=46, weight=5),
            SeedShape(gpus=8, memory=81920, cores=100, gputype="A100", weight=1.5),
        ],
    )
    assert scheduler_settings(render("default"), tmp_path).fragmentation == Fragmentation()


def test_fgd_balanced_typical_shapes_and_the_prioritize_weight_reach_the_schedulers(
    tmp_path: Path,
) -> None:
    values = tmp_path / "typical.yaml"
    shapes = [
        {"gpus": 1, "memoryPercent": 81, "cores": 81, "cpu": "3152m", "hostMemory": "16Gi",
         "weight": 1047},
        {"gpus": 0, "cpu": 12.5, "weight": 366},
    ]
    values.write_text(
        yaml.safe_dump(
            {
                "scheduler": {
                    "combineScores": True,
                    "prioritizeWeight": 150,
                    "defaultSchedulerPolicy": {
                        "nodeSchedulerPolicy": "fgd-balanced",
                        "gpuSchedulerPolicy": "fgd-balanced,numa",
                    },
                    "fragmentation": {"typicalShapes": shapes},
                }
            }
        )
    )
    objects = template(values)
    settings = scheduler_settings(objects, tmp_path)
    policies = settings.scheduling().policies
    assert (policies.node, policies.gpu, policies.numa) == (
        Policy.FGD_BALANCED,
        Policy.FGD_BALANCED,
        True,
    )
    assert settings.fragmentation.given_shapes() == [
        TypicalShape.model_validate(
            {"gpus": 1, "memory_percent": 81, "cores": 81, "cpu": "3152m", "host_memory": "16Gi",
             "weight": 1047}
        ),
        TypicalShape.model_validate({"gpus": 0, "cpu": "12500m", "weight": 366}),
    ]
    assert settings.fragmentation.given_shapes()[0].host_memory == 16384  # MiB
    kube = yaml.safe_load(one(objects, "ConfigMap", "vgpu-scheduler")["data"]["config.yaml"])
    assert kube["extenders"][0]["weight"] == 150


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ({"window": 0}, "/scheduler/fragmentation/window"),
        ({"typicalShapes": [{"cpu": "3 cores"}]}, "/scheduler/fragmentation/typicalShapes/0/cpu"),
        ({"typicalShapes": [{"gpus": -1}]}, "/scheduler/fragmentation/typicalShapes/0/gpus"),
        (
            {"typicalShapes": [{"hostMemory": "16 GiB"}]},
            "/scheduler/fragmentation/typicalShapes/0/hostMemory",
        ),
        ({"coverage": 1.5}, "/scheduler/fragmentation/coverage"),
        ({"tolerance": -0.1}, "/scheduler/fragmentation/tolerance"),
        ({"seedShapes": [{"gpus": 1, "memoryPercnt": 5}]}, "/scheduler/fragmentation/seedShapes/0"),
    ],
)
def test_a_bad_fragmentation_value_is_refused_naming_it(
    setting: dict[str, Any], field: str, tmp_path: Path
) -> None:
    values = tmp_path / "bad.yaml"
    values.write_text(yaml.safe_dump({"scheduler": {"fragmentation": setting}}))
    result = helm("template", "vgpu", str(CHART), "--values", str(values))
    assert result.returncode != 0
    assert field in result.stderr


@pytest.mark.parametrize("variant", ["default", "hami-values"])
def test_vgpu_and_kube_scheduler_elect_their_leaders_on_different_leases(
    variant: str, tmp_path: Path
) -> None:
    objects = render(variant)
    election = scheduler_settings(objects, tmp_path).leader_election
    kube = yaml.safe_load(one(objects, "ConfigMap", "vgpu-scheduler")["data"]["config.yaml"])
    kube_lease = kube["leaderElection"]
    assert election.enabled and kube_lease["leaderElect"]
    assert (election.namespace, election.lease_name) != (
        kube_lease["resourceNamespace"],
        kube_lease["resourceName"],
    )


def test_kube_scheduler_calls_the_extender_on_loopback_with_the_routes_vgpu_serves(
    tmp_path: Path,
) -> None:
    for combine in (False, True):
        objects = template(set_values=(f"scheduler.combineScores={str(combine).lower()}",))
        settings = scheduler_settings(objects, tmp_path)
        configmap = one(objects, "ConfigMap", "vgpu-scheduler")["data"]
        kube = yaml.safe_load(configmap["config.yaml"])
        assert kube["kind"] == "KubeSchedulerConfiguration"
        assert [p["schedulerName"] for p in kube["profiles"]] == [settings.scheduler_name]
        [extender] = kube["extenders"]
        keys = ("filterVerb", "prioritizeVerb", "bindVerb", "preemptVerb")
        verbs = {extender[k] for k in keys if k in extender}
        single = {"filter", "bind", "preempt"}
        assert verbs == (single | {"prioritize"} if combine else single)
        assert {f"/{v}" for v in verbs} <= routes("extender")
        assert settings.combine_scores is combine
        vendor = settings.vendor()
        managed = {r["name"]: r["ignoredByScheduler"] for r in extender["managedResources"]}
        assert managed == dict.fromkeys([*vendor.resources, vendor.priority_resource], True)
        args = containers(one(objects, "Deployment"))["vgpu"]["args"]
        assert extender["urlPrefix"] == "http://127.0.0.1:8888"
        assert extender["enableHTTPS"] is False
        assert "--extender-listen=127.0.0.1:8888" in args


def test_the_webhook_reaches_the_tls_listener_through_the_service(tmp_path: Path) -> None:
    objects = render("default")
    settings = scheduler_settings(objects, tmp_path)
    [hook] = one(objects, "MutatingWebhookConfiguration")["webhooks"]
    service = one(objects, "Service", "vgpu-scheduler")
    target = hook["clientConfig"]["service"]
    assert (target["name"], target["namespace"]) == ("vgpu-scheduler", NAMESPACE)
    assert target["path"] == "/webhook" and "/webhook" in routes("webhook")
    assert set(hook["admissionReviewVersions"]) == {"v1", "v1beta1"}
    port = next(p for p in service["spec"]["ports"] if p["port"] == target["port"])
    vgpu = containers(one(objects, "Deployment"))["vgpu"]
    named = {p["name"]: p["containerPort"] for p in vgpu["ports"]}
    assert f"--listen=0.0.0.0:{named[port['targetPort']]}" in vgpu["args"]
    probe = vgpu["readinessProbe"]["httpGet"]
    assert (probe["port"], probe["scheme"]) == ("webhook", "HTTPS")
    assert probe["path"] in routes("webhook")
    assert settings.tls_cert is not None and str(settings.tls_cert.parent) == "/tls"
    certs = settings.webhook_tls
    assert certs is not None
    assert (certs.secret_name, certs.webhook_name, certs.service_name) == (
        "vgpu-scheduler-tls",
        one(objects, "MutatingWebhookConfiguration")["metadata"]["name"],
        "vgpu-scheduler",
    )
    assert str(certs.cert_dir) == "/tls"


def test_the_webhook_never_blanks_an_injected_ca_and_only_sees_gpu_pods() -> None:
    [hook] = one(render("default"), "MutatingWebhookConfiguration")["webhooks"]
    assert "caBundle" not in hook["clientConfig"]
    # Fail is safe because only pods asking for a vgpu resource are sent
    assert hook["failurePolicy"] == "Fail"
    [condition] = hook["matchConditions"]
    for name in ("nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"):
        assert f'"{name}"' in condition["expression"]
    assert {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]} in (
        hook["objectSelector"]["matchExpressions"]
    )


def test_metrics_are_served_on_their_own_port_and_scraped_by_the_service_monitor() -> None:
    objects = render("monitoring")
    vgpu = containers(one(objects, "Deployment"))["vgpu"]
    assert "--metrics-listen=0.0.0.0:9395" in vgpu["args"]
    assert {"name": "metrics", "containerPort": 9395} in vgpu["ports"]
    service = one(objects, "Service", "vgpu-scheduler")
    assert {"name": "monitor", "port": 9395, "targetPort": "metrics"} in service["spec"]["ports"]
    for monitor_name, service_name, port in (
        ("vgpu-scheduler", "vgpu-scheduler", "monitor"),
        ("vgpu-device-plugin-monitor", "vgpu-device-plugin-monitor", "monitorport"),
    ):
        monitor = one(objects, "ServiceMonitor", monitor_name)
        target = one(objects, "Service", service_name)
        assert monitor["spec"]["endpoints"][0]["port"] == port
        assert port in {p["name"] for p in target["spec"]["ports"]}
        assert monitor["spec"]["selector"]["matchLabels"].items() <= (
            target["metadata"]["labels"].items()
        )
    dashboard = one(objects, "ConfigMap", "vgpu-dashboards")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert set(dashboard["data"]) == {"vgpu-hami.json", "vgpu-usage.json"}  # allocation, usage
    assert "hami_gpu_memory_limit_bytes" in dashboard["data"]["vgpu-hami.json"]
    assert "hami_host_gpu_utilization_ratio" in dashboard["data"]["vgpu-usage.json"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_vgpu_container_passes_only_flags_its_command_accepts(variant: str) -> None:
    objects = render(variant)
    found = [
        c
        for owner in objects
        if owner["kind"] in ("Deployment", "DaemonSet")
        for c in containers(owner).values()
        if "args" in c
    ]
    assert {c["args"][0] for c in found} >= {"scheduler", "device-plugin", "monitor"}
    for c in found:
        parse(c["args"])  # the `vgpu` parser: SystemExit(2) on a flag the command refuses


def test_the_monitor_runs_on_the_plugin_s_nodes_in_a_pod_of_its_own() -> None:
    objects = render("default")
    plugin, monitors = one(objects, "DaemonSet", DEVICE_PLUGIN), one(objects, "DaemonSet", MONITOR)
    monitor = containers(monitors)["vgpu-monitor"]
    parsed = parse(monitor["args"])
    assert (str(parsed.host_dir), parsed.metrics_listen) == ("/usr/local/vgpu/containers", ":9394")
    pod, plugin_pod = monitors["spec"]["template"]["spec"], plugin["spec"]["template"]["spec"]
    [mount] = monitor["volumeMounts"]
    hosts = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    assert hosts[mount["name"]] == mount["mountPath"] == "/usr/local/vgpu/containers"
    for placement in ("nodeSelector", "tolerations", "priorityClassName"):
        assert pod[placement] == plugin_pod[placement]
    # its own account: the plugin's may patch nodes and pods, the monitor only reads pods
    assert (pod["serviceAccountName"], plugin_pod["serviceAccountName"]) == (MONITOR, DEVICE_PLUGIN)
    assert "vgpu-monitor" not in containers(plugin)
    service = one(objects, "Service", "vgpu-device-plugin-monitor")
    assert service["spec"]["ports"] == [
        {"name": "monitorport", "port": 9394, "targetPort": "monitorport"}
    ]
    assert service["spec"]["selector"].items() <= pod_labels(monitors).items()
    off = template(set_values=("devicePlugin.monitor.enabled=false",))
    assert not [o for o in off if o["metadata"]["name"] in (MONITOR, "vgpu-device-plugin-monitor")]


def pod_labels(owner: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = owner["spec"]["template"]["metadata"]["labels"]
    return labels


def test_log_settings_reach_every_vgpu_container() -> None:
    objects = template(set_values=("log.level=DEBUG", "log.json=true"))
    for owner, name in (
        (one(objects, "Deployment"), "vgpu"),
        (one(objects, "DaemonSet", DEVICE_PLUGIN), "device-plugin"),
        (one(objects, "DaemonSet", MONITOR), "vgpu-monitor"),
    ):
        args = containers(owner)[name]["args"]
        assert "--log-level=DEBUG" in args and "--log-json" in args


def test_rollouts_keep_a_ready_scheduler_and_evictions_leave_one() -> None:
    objects = render("default")
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    # readiness without leadership: the surge replica becomes Ready while the old one leads
    probe = containers(deployment)["vgpu"]["readinessProbe"]["httpGet"]["path"]
    assert probe == "/healthz"
    assert deployment["spec"]["template"]["spec"]["priorityClassName"] == "system-cluster-critical"
    assert not [o for o in objects if o["kind"] == "PodDisruptionBudget"]  # 1 replica: drains pass
    replicated = template(set_values=("scheduler.replicas=2",))
    pdb = one(replicated, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert one(replicated, "Deployment")["spec"]["replicas"] == 2
    plugin = one(objects, "DaemonSet", DEVICE_PLUGIN)
    assert plugin["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    assert plugin["spec"]["template"]["spec"]["priorityClassName"] == "system-node-critical"
    assert plugin["spec"]["template"]["spec"]["nodeSelector"] == {"gpu": "on"}


def test_every_container_drops_capabilities_and_runs_under_the_default_seccomp_profile() -> None:
    owners = [o for o in render("default") if o["kind"] in ("Deployment", "DaemonSet")]
    assert len(owners) == 3
    for owner in owners:
        pod = owner["spec"]["template"]["spec"]
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for name, container in containers(owner).items():
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"]["drop"] == ["ALL"], name
            assert context["readOnlyRootFilesystem"] is True, name
    scheduler = one(render("default"), "Deployment")["spec"]["template"]["spec"]
    assert scheduler["securityContext"]["runAsNonRoot"] is True


def test_a_non_root_scheduler_may_listen_on_443_only_through_the_pod_sysctl() -> None:
    def sysctls(*settings: str) -> list[dict[str, str]]:
        pod = one(template(set_values=settings), "Deployment")["spec"]["template"]["spec"]
        return list(pod["securityContext"].get("sysctls", []))

    assert sysctls() == [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]
    assert sysctls("scheduler.service.httpTargetPort=8443") == []


def test_the_device_plugin_runs_as_root_to_write_root_owned_host_directories() -> None:
    plugin = one(render("default"), "DaemonSet", DEVICE_PLUGIN)["spec"]["template"]["spec"]
    assert plugin["securityContext"]["runAsUser"] == 0
    hosts = {v["name"]: v["hostPath"]["path"] for v in plugin["volumes"] if "hostPath" in v}
    assert hosts["device-plugins"] == "/var/lib/kubelet/device-plugins"
    assert hosts["lib"] == "/usr/local/vgpu"


def test_hami_core_is_copied_into_the_host_dir_by_an_init_container_from_hami_s_image() -> None:
    objects = template(
        set_values=(
            "devicePlugin.hamiCore.image.registry=mirror.example.com",
            "devicePlugin.hamiCore.image.tag=v2.9.0",
        )
    )
    plugin = one(objects, "DaemonSet", DEVICE_PLUGIN)
    init = containers(plugin)["hami-core"]
    assert init["image"] == "mirror.example.com/projecthami/hami:v2.9.0"
    assert init["volumeMounts"] == [{"name": "lib", "mountPath": "/usr/local/vgpu"}]
    plugin_config = yaml.safe_load(
        one(objects, "ConfigMap", "vgpu-device-plugin")["data"]["config.yaml"]
    )
    assert plugin_config["hook_path"] == "/usr/local"


@pytest.mark.parametrize("hami_image", ["v2.5 and later", "before v2.5"])
def test_the_init_container_copies_hami_core_from_either_layout_of_hami_s_image(
    hami_image: str, tmp_path: Path
) -> None:
    """From v2.5 HAMi's image copies HAMi-core with its own vgpu-init.sh; before, HAMi's chart
    copied /k8s-vgpu/lib/nvidia/* itself. The rendered command runs here against each layout,
    the image's root and the host directory moved under tmp_path."""
    command = containers(one(template(), "DaemonSet", DEVICE_PLUGIN))["hami-core"]["command"]
    image, host = tmp_path / "k8s-vgpu", tmp_path / "host"
    (image / "lib" / "nvidia").mkdir(parents=True)
    host.mkdir()
    for name in ("libvgpu.so", "ld.so.preload"):
        (image / "lib" / "nvidia" / name).write_text(name)
    if hami_image == "v2.5 and later":
        init = image / "bin" / "vgpu-init.sh"
        init.parent.mkdir()
        init.write_text(f'#!/bin/sh\ncp {image}/lib/nvidia/libvgpu.so "$1" && touch "$1/by-init"\n')
        init.chmod(0o755)
    script = command[-1].replace("/k8s-vgpu", str(image)).replace("/usr/local/vgpu/", f"{host}/")

    subprocess.run([*command[:-1], script], check=True)

    copied = {p.name for p in host.iterdir()}
    if hami_image == "v2.5 and later":
        assert copied == {"libvgpu.so", "by-init"}
    else:
        assert copied == {"libvgpu.so", "ld.so.preload"}


def test_the_kube_scheduler_auth_reader_binding_is_in_kube_system() -> None:
    binding = one(render("default"), "RoleBinding", "vgpu-scheduler-auth-reader")
    assert binding["metadata"]["namespace"] == "kube-system"
    assert binding["roleRef"]["name"] == "extension-apiserver-authentication-reader"


def test_the_admission_policy_trusts_the_release_s_service_accounts() -> None:
    objects = template(
        set_values=(
            "scheduler.admissionPolicy.trustedUsers={system:serviceaccount:hami:hami-scheduler}",
        )
    )
    policy = one(objects, "ValidatingAdmissionPolicy", "vgpu-scheduler-owned-pod-keys")
    trusted = next(v for v in policy["spec"]["variables"] if v["name"] == "trusted")["expression"]
    for account in ("vgpu-scheduler", "vgpu-device-plugin"):
        assert f"'system:serviceaccount:{NAMESPACE}:{account}'" in trusted
        assert one(objects, "ServiceAccount", account)
    assert "'system:serviceaccount:hami:hami-scheduler'" in trusted
    binding = one(objects, "ValidatingAdmissionPolicyBinding", "vgpu-scheduler-owned-pod-keys")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
