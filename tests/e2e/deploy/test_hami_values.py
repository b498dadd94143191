"""A HAMi operator's values install vgpu as they are (issue 18): HAMi v2.10's own values.yaml
(and v2.4's and v2.6's, whose image keys are strings) and a real cluster's overrides, alone and together, render what the operator set (split count,
images, pull secrets, node ports, log levels), every HAMi value either takes effect or is named
in the install notes, and a wrong value stops `helm template` with the schema's message."""

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.deploy.render import (
    CHART,
    DEVICE_PLUGIN,
    HAMI_BEFORE_V2_7,
    HAMI_VALUES,
    MONITOR,
    NAMESPACE,
    OPERATOR_OVERRIDES,
    containers,
    helm,
    notes,
    one,
    template,
    template_args,
)
from vgpu.app.cli import parse
from vgpu.app.device_plugin.config import load_config as load_plugin_config
from vgpu.app.device_plugin.nodeconfig import node_settings
from vgpu.app.scheduler.config import load_config as load_scheduler_config

BOTH = (HAMI_VALUES, OPERATOR_OVERRIDES)
VGPU_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
IGNORED = yaml.safe_load((CHART / "hami-ignored.yaml").read_text())


def split_count(objects: list[dict[str, Any]], node: str, tmp_path: Path) -> int:
    """The split count the device plugin uses on `node`, its node config applied."""
    data = one(objects, "ConfigMap", "vgpu-device-plugin")["data"]
    (tmp_path / "config.yaml").write_text(data["config.yaml"])
    (tmp_path / "config.json").write_text(data["config.json"])
    config = load_plugin_config(
        tmp_path / "config.yaml",
        env={"NODE_NAME": node},
        overrides={"node_config_file": tmp_path / "config.json"},
    )
    return node_settings(config).sharing.split_count


def images(objects: list[dict[str, Any]]) -> dict[str, str]:
    return {
        name: c["image"]
        for owner in objects
        if owner["kind"] in ("Deployment", "DaemonSet")
        for name, c in containers(owner).items()
    }


def pod_owners(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The scheduler Deployment, the device plugin's and the monitor's DaemonSets."""
    owners = [o for o in objects if o["kind"] in ("Deployment", "DaemonSet")]
    assert len(owners) == 3
    return owners


def log_levels(objects: list[dict[str, Any]]) -> dict[str, str]:
    """Each vgpu container's log level, as `vgpu` parses its args."""
    return {
        name: parse(c["args"]).log_level
        for owner in objects
        if owner["kind"] in ("Deployment", "DaemonSet")
        for name, c in containers(owner).items()
        if "args" in c
    }


def flat_keys(values: dict[str, Any], above: str = "") -> set[str]:
    """Dotted paths of the leaves (an empty map is a leaf)."""
    keys = set()
    for key, value in values.items():
        path = f"{above}{key}"
        if isinstance(value, dict) and value:
            keys |= flat_keys(value, f"{path}.")
        else:
            keys.add(path)
    return keys


def schema_keys(schema: dict[str, Any], node: Any, path: str = "") -> set[str]:
    """Dotted paths of the leaf properties values.schema.json describes ($refs followed)."""
    if isinstance(node, dict) and "$ref" in node:
        node = schema["definitions"][node["$ref"].rpartition("/")[2]]
    if not isinstance(node, dict):
        return {path}
    parts = [*node.get("allOf", []), node]
    children = {k: v for part in parts for k, v in part.get("properties", {}).items()}
    if not children:
        return {path}
    return {
        key
        for name, child in children.items()
        for key in schema_keys(schema, child, f"{path}.{name}" if path else name)
    }


def key_in(values: dict[str, Any], dotted: str) -> bool:
    node: Any = values
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def covers(key: str, paths: set[str]) -> bool:
    """`key` is one of `paths`, under one, or above one."""
    return any(key == p or key.startswith(f"{p}.") or p.startswith(f"{key}.") for p in paths)


@pytest.mark.parametrize("node", ["gpu-1", "gpu-7"])
def test_the_operator_s_split_count_holds_on_every_node(node: str, tmp_path: Path) -> None:
    # gpu-7's node-config entry sets other things on purpose, not the split count
    assert split_count(template(*BOTH), node, tmp_path) == 4
    assert split_count(template(HAMI_VALUES), node, tmp_path) == 10
    assert (
        split_count(template(set_values=("devicePlugin.deviceSplitCount=6",)), node, tmp_path) == 6
    )


def test_a_node_config_entry_overrides_the_node_it_names_on_purpose(tmp_path: Path) -> None:
    entry = {"nodeconfig": [{"name": "gpu-7", "devicesplitcount": 2}]}
    values = tmp_path / "node-config.yaml"
    values.write_text(
        yaml.safe_dump({"devicePlugin": {"nodeConfiguration": {"config": str(entry)}}})
    )
    objects = template(*BOTH, values)
    assert split_count(objects, "gpu-7", tmp_path) == 2
    assert split_count(objects, "gpu-1", tmp_path) == 4


def test_vgpu_s_images_keep_vgpu_s_name_and_version_and_hami_s_image_only_carries_hami_core() -> (
    None
):
    registry = "harbor.example.com/gpu"
    assert images(template(*BOTH)) == {
        "vgpu": f"{registry}/vgpu:{VGPU_VERSION}",
        "device-plugin": f"{registry}/vgpu:{VGPU_VERSION}",
        "vgpu-monitor": f"{registry}/vgpu:{VGPU_VERSION}",
        "hami-core": f"{registry}/projecthami/hami:v2.10.0",
        "kube-scheduler": f"{registry}/google_containers/kube-scheduler:v1.31.1",
    }
    hami_only = images(template(HAMI_VALUES, set_values=("global.imageTag=v2.9.1",)))
    assert {hami_only[c] for c in ("vgpu", "device-plugin", "vgpu-monitor")} == {
        f"vgpu:{VGPU_VERSION}"
    }
    assert hami_only["hami-core"] == "docker.io/projecthami/hami:v2.9.1"


@pytest.mark.parametrize("values", HAMI_BEFORE_V2_7, ids=lambda p: p.stem)
def test_hami_s_image_strings_before_v2_7_are_pulled_as_hami_pulled_them(
    values: Path, tmp_path: Path
) -> None:
    release = yaml.safe_load(values.read_text())["version"]
    as_given = images(template(values, kube_version="1.31.4+k3s1"))
    assert as_given["kube-scheduler"] == (
        "registry.cn-hangzhou.aliyuncs.com/google_containers/kube-scheduler:v1.31.4"
    )
    assert as_given["hami-core"] == f"projecthami/hami:{release}"

    mirrored = tmp_path / "mirrored.yaml"
    mirrored.write_text(
        yaml.safe_dump(
            {
                "imagePullSecrets": [{"name": "harbor-cred"}],
                "devicePlugin": {"image": "harbor.example.com/hami/hami"},
                "scheduler": {
                    "kubeScheduler": {
                        "image": "harbor.example.com/k8s/kube-scheduler",
                        "imageTag": "v1.30.2",
                        "imagePullPolicy": "Always",
                    }
                },
            }
        )
    )
    objects = template(values, mirrored)
    assert images(objects)["hami-core"] == f"harbor.example.com/hami/hami:{release}"
    scheduler = containers(one(objects, "Deployment"))["kube-scheduler"]
    assert scheduler["image"] == "harbor.example.com/k8s/kube-scheduler:v1.30.2"
    assert scheduler["imagePullPolicy"] == "Always"
    for owner in pod_owners(objects):
        pod = owner["spec"]["template"]["spec"]
        assert {"name": "harbor-cred"} in pod["imagePullSecrets"]


def test_hami_s_device_plugin_node_selector_before_v2_8_still_places_the_plugin(
    tmp_path: Path,
) -> None:
    # an operator's v2.6 file whose plugin runs on the nodes GPU feature discovery labels
    hami = yaml.safe_load(HAMI_BEFORE_V2_7[1].read_text())
    hami["devicePlugin"]["nvidianodeSelector"] = {"nvidia.com/gpu.present": "true"}
    older = tmp_path / "older.yaml"
    older.write_text(yaml.safe_dump(hami))

    def placed(*values: Path, set_values: tuple[str, ...] = ()) -> dict[str, str]:
        plugin = one(template(*values, set_values=set_values), "DaemonSet", DEVICE_PLUGIN)
        selector: dict[str, str] = plugin["spec"]["template"]["spec"]["nodeSelector"]
        return selector

    assert placed(HAMI_BEFORE_V2_7[1]) == {"gpu": "on"}  # HAMi's default, under either key
    assert placed(older) == {"nvidia.com/gpu.present": "true"}
    assert "labelled nvidia.com/gpu.present=true" in notes(older)
    # the migration guide's selector, set under vgpu's key, wins over the older file's
    guide = ("devicePlugin.nvidiaNodeSelector.vgpu\\.io/device-plugin=on",)
    guide += ("devicePlugin.nvidiaNodeSelector.gpu=null",)
    assert placed(older, set_values=guide) == {"vgpu.io/device-plugin": "on"}


# v1.20.0: HAMi v2.4.0's default imageTag, which HAMi v2.4 never used
@pytest.mark.parametrize("tag", ["v1.20.0", "v1.24.3-eks-1"])
def test_a_kube_scheduler_tag_older_than_1_25_gives_way_to_the_cluster_s_version(
    tag: str, tmp_path: Path
) -> None:
    # such a kube-scheduler cannot read the KubeSchedulerConfiguration v1 the chart writes
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump({"scheduler": {"kubeScheduler": {"imageTag": tag}}}))
    objects = template(HAMI_BEFORE_V2_7[0], old, kube_version="1.31.4")
    assert images(objects)["kube-scheduler"].endswith("/kube-scheduler:v1.31.4")
    assert f"the values' tag {tag} is older than 1.25" in notes(HAMI_BEFORE_V2_7[0], old)


@pytest.mark.parametrize(
    "secrets",
    [["harbor-cred"], [{"name": "harbor-cred"}]],
    ids=["names", "objects"],
)
def test_pull_secrets_are_taken_as_names_or_objects(secrets: list[Any], tmp_path: Path) -> None:
    values = tmp_path / "secrets.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "global": {"imagePullSecrets": secrets},
                "scheduler": {"extender": {"image": {"pullSecrets": ["extender-cred"]}}},
            }
        )
    )
    objects = template(*BOTH, values)
    for owner in pod_owners(objects):
        more = [{"name": "extender-cred"}] if owner["kind"] == "Deployment" else []
        pod = owner["spec"]["template"]["spec"]
        assert pod["imagePullSecrets"] == [{"name": "harbor-cred"}, *more]


def test_node_ports_are_the_ones_hami_s_values_name() -> None:
    objects = template(*BOTH)
    scheduler = one(objects, "Service", "vgpu-scheduler")["spec"]
    assert scheduler["type"] == "NodePort"
    assert {p["name"]: (p["port"], p["nodePort"]) for p in scheduler["ports"]} == {
        "http": (443, 31998),
        "monitor": (31993, 31993),
    }
    monitor = one(objects, "Service", "vgpu-device-plugin-monitor")["spec"]
    assert [(p["port"], p["nodePort"]) for p in monitor["ports"]] == [(31992, 31992)]
    cluster_ip = one(template(), "Service", "vgpu-scheduler")["spec"]
    assert all("nodePort" not in p for p in cluster_ip["ports"])


def test_log_levels_are_the_ones_the_operator_set() -> None:
    assert log_levels(template(*BOTH)) == {
        "vgpu": "DEBUG",
        "device-plugin": "INFO",
        "vgpu-monitor": "DEBUG",
    }
    # HAMi's own defaults: --debug and -v=4 everywhere
    assert set(log_levels(template(HAMI_VALUES)).values()) == {"DEBUG"}
    assert set(log_levels(template()).values()) == {"INFO"}


@pytest.mark.parametrize(
    ("values", "plugin"),
    [(HAMI_BEFORE_V2_7[0], "INFO"), (HAMI_BEFORE_V2_7[1], "DEBUG")],
    ids=lambda v: v.stem if isinstance(v, Path) else v,
)
def test_older_hami_args_start_every_container_at_their_level(values: Path, plugin: str) -> None:
    # v2.4's device plugin args are -v=false (its version switch, off): the chart's level stays
    assert log_levels(template(values)) == {
        "vgpu": "DEBUG",  # --debug -v=4
        "device-plugin": plugin,
        "vgpu-monitor": "INFO",
    }


def test_an_operator_s_hami_values_keep_their_meaning(tmp_path: Path) -> None:
    objects = template(*BOTH)
    path = tmp_path / "scheduler.yaml"
    path.write_text(one(objects, "ConfigMap", "vgpu-scheduler")["data"]["scheduler.yaml"])
    settings = load_scheduler_config(path, env={})
    assert settings.scheduler_name == "hami-scheduler"
    assert (settings.node_policy.value, settings.gpu_policy) == ("spread", "binpack")
    assert settings.gpu_core_policy == "force"
    assert settings.lock_expiry == 120
    assert settings.legacy_metrics is True
    assert settings.webhook_tls is None  # cert-manager makes the certificate
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    assert one(objects, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    [hook] = one(objects, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["failurePolicy"] == "Ignore"
    assert {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", "monitoring"],
    } in hook["namespaceSelector"]["matchExpressions"]
    assert one(objects, "Certificate")["spec"]["secretName"] == "vgpu-scheduler-tls"
    assert one(objects, "RuntimeClass")["metadata"]["name"] == "nvidia"
    plugin = one(objects, "DaemonSet", DEVICE_PLUGIN)
    assert plugin["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia"
    monitor = containers(one(objects, "DaemonSet", MONITOR))["vgpu-monitor"]
    assert "--legacy-metrics" in monitor["args"]


def test_hami_s_global_labels_annotations_and_pod_annotations_are_honoured() -> None:
    objects = template(*BOTH)
    assert all(o["metadata"]["labels"]["team"] == "ml-platform" for o in objects)
    for owner in pod_owners(objects):
        assert owner["metadata"]["annotations"] == {"owner": "gpu-team@example.com"}
        pod = owner["spec"]["template"]["metadata"]
        assert pod["annotations"]["prometheus.io/scrape"] == "true"
        assert "team" not in owner["spec"]["selector"]["matchLabels"]


def test_service_monitors_only_where_the_prometheus_operator_s_api_is_served() -> None:
    def monitors(*api_versions: str) -> list[str]:
        objects = template(*BOTH, api_versions=api_versions)
        return sorted(o["metadata"]["name"] for o in objects if o["kind"] == "ServiceMonitor")

    assert monitors() == []
    assert monitors("monitoring.coreos.com/v1") == ["vgpu-device-plugin-monitor", "vgpu-scheduler"]
    assert monitors("monitoring.coreos.com/v1/ServiceMonitor") == monitors(
        "monitoring.coreos.com/v1"
    )
    assert "no monitoring.coreos.com/v1" in notes(*BOTH)


@pytest.mark.parametrize("values", [HAMI_VALUES, *HAMI_BEFORE_V2_7], ids=lambda p: p.stem)
def test_every_key_of_hami_s_values_is_a_vgpu_value_or_listed_as_ignored(values: Path) -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    ours = flat_keys(yaml.safe_load((CHART / "values.yaml").read_text()))
    ours |= schema_keys(schema, schema)
    ignored = {key for entry in IGNORED for key in entry["keys"]}
    hami = flat_keys(yaml.safe_load(values.read_text()))
    assert [k for k in sorted(hami) if not covers(k, ours) and not covers(k, ignored)] == []
    assert [k for k in sorted(ignored) if covers(k, ours)] == []  # never both


def test_the_notes_name_each_ignored_hami_value_given_with_the_reason() -> None:
    text = " ".join(notes(HAMI_VALUES).split())
    hami = yaml.safe_load(HAMI_VALUES.read_text())
    given = 0
    for entry in IGNORED:
        named = [key for key in entry["keys"] if key_in(hami, key)]
        for key in named:
            assert f"{key}," in text or f"{key}:" in text, key
        if named:
            assert " ".join(entry["why"].split()) in text
        given += len(named)
    assert given > 50
    assert "scheduler.patch" in text and "mluResourceName" in text
    assert "have no effect in vgpu" not in notes()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "devicePlugin.deviceSplitCount=-1",
            "at '/devicePlugin/deviceSplitCount': minimum: got -1, want 1",
        ),
        (
            "scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy=fastest",
            "at '/scheduler/defaultSchedulerPolicy/nodeSchedulerPolicy': value must be one of "
            "'binpack', 'spread'",
        ),
        (
            "scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy=fastest",
            "at '/scheduler/defaultSchedulerPolicy/gpuSchedulerPolicy': 'fastest' does not match",
        ),
        (
            "devicePlugin.service.httpPort=70000",
            "at '/devicePlugin/service/httpPort': maximum: got 70,000, want 65,535",
        ),
        ("log.level=LOUD", "at '/log/level': value must be one of"),
    ],
)
def test_a_wrong_value_fails_at_helm_template_with_the_schema_s_message(
    setting: str, message: str
) -> None:
    result = helm(*template_args(*BOTH, set_values=(setting,)))
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_the_chart_installs_into_hami_s_namespace_override_with_its_own_secrets(
    tmp_path: Path,
) -> None:
    objects = template(*BOTH, set_values=("namespaceOverride=kube-system",))
    assert {o["metadata"].get("namespace") for o in objects} <= {"kube-system", None}
    path = tmp_path / "scheduler.yaml"
    path.write_text(one(objects, "ConfigMap", "vgpu-scheduler")["data"]["scheduler.yaml"])
    settings = load_scheduler_config(path, env={})
    assert settings.signing.secret_namespace == "kube-system"
    assert settings.leader_election.namespace == "kube-system"
    assert NAMESPACE != "kube-system"
