"""The chart's GPU-node pods: every host path the device plugin writes and another
part reads comes from global.gpuHookPath; the plugin and the monitor go where NVIDIA's charts
let an operator put them (affinity, extra tolerations, security contexts such as SELinux's
spc_t); the HAMi-core init container has requests and limits; the device plugin's own-node
admission policy is rendered only where every pod's token names its node (1.32+)."""

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.deploy.render import (
    ADMISSION_POLICY_KINDS,
    DEVICE_PLUGIN,
    HAMI_VALUES,
    MONITOR,
    OPERATOR_OVERRIDES,
    containers,
    notes,
    one,
    render_errors,
    template,
)
from vgpu.app.cli import parse
from vgpu.app.device_plugin.config import load_config as load_plugin_config
from vgpu.app.device_plugin.container import allocation_config
from vgpu.app.device_plugin.nodeconfig import node_settings
from vgpu.domain import AllocationInput, DeviceGrant, allocate_container

OWN_NODE_POLICY = "vgpu-device-plugin-own-node"
POLICY_API = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"


def pod_spec(owner: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = owner["spec"]["template"]["spec"]
    return spec


def host_mounts(owner: dict[str, Any], container: str) -> dict[str, str]:
    """mount path -> host path of the container's hostPath volumes."""
    volumes = pod_spec(owner)["volumes"]
    hosts = {v["name"]: v["hostPath"]["path"] for v in volumes if "hostPath" in v}
    return {
        m["mountPath"]: hosts[m["name"]]
        for m in containers(owner)[container]["volumeMounts"]
        if m["name"] in hosts
    }


def plugin_host_dirs(objects: list[dict[str, Any]], tmp_path: Path) -> tuple[str, str]:
    """(HAMi-core's directory, where a container's usage goes) on the host, as the device
    plugin's Allocate answer names them with the settings the chart gives it."""
    data = one(objects, "ConfigMap", DEVICE_PLUGIN)["data"]
    (tmp_path / "config.yaml").write_text(data["config.yaml"])
    (tmp_path / "config.json").write_text(data["config.json"])
    config = load_plugin_config(
        tmp_path / "config.yaml",
        env={"NODE_NAME": "gpu-1"},
        overrides={"node_config_file": tmp_path / "config.json"},
    )
    answer = allocate_container(
        (DeviceGrant("GPU-a", "NVIDIA", 1000, 10),),
        AllocationInput(pod_uid="uid-1", namespace="team", container="main", cache_id="c0"),
        allocation_config(config, node_settings(config)),
    )
    by_host = {Path(m.host_path) for m in answer.mounts}
    [library] = [p for p in by_host if p.name == "libvgpu.so"]
    [usage] = [p for p in by_host if p.name == "uid-1_main"]
    return str(library.parent), str(usage.parent)


@pytest.mark.parametrize("values", [(), (HAMI_VALUES,)], ids=["vgpu's values", "HAMi's values"])
def test_every_host_path_the_plugin_writes_and_another_part_reads_follows_the_hook_path(
    values: tuple[Path, ...], tmp_path: Path
) -> None:
    objects = template(*values, set_values=("global.gpuHookPath=/opt",))
    hami_core, usage = plugin_host_dirs(objects, tmp_path)
    assert (hami_core, usage) == ("/opt/vgpu", "/opt/vgpu/containers")
    plugin, monitors = one(objects, "DaemonSet", DEVICE_PLUGIN), one(objects, "DaemonSet", MONITOR)
    # the init container copies HAMi-core where the plugin mounts it from, at the same path
    init = containers(plugin)["hami-core"]
    assert host_mounts(plugin, "hami-core") == {hami_core: hami_core}
    assert f"{hami_core}/" in init["command"][-1]
    assert host_mounts(plugin, "device-plugin")[hami_core] == hami_core
    # the monitor reads each container's usage where the plugin has HAMi-core write it
    assert str(parse(containers(monitors)["vgpu-monitor"]["args"]).host_dir) == usage
    assert host_mounts(monitors, "vgpu-monitor") == {usage: usage}


def test_hami_s_own_path_values_are_named_as_without_effect() -> None:
    text = " ".join(notes(HAMI_VALUES).split())
    assert "devicePlugin.libPath, devicePlugin.monitor.ctrPath:" in text
    assert "<global.gpuHookPath>/vgpu" in text


def test_the_hami_core_init_container_has_requests_and_limits() -> None:
    for values in ((), (HAMI_VALUES, OPERATOR_OVERRIDES)):
        init = containers(one(template(*values), "DaemonSet", DEVICE_PLUGIN))["hami-core"]
        assert init["resources"]["requests"].keys() == {"cpu", "memory"}
        assert "memory" in init["resources"]["limits"]


@pytest.mark.parametrize("owner", [DEVICE_PLUGIN, MONITOR])
def test_operators_place_the_node_pods_by_nfd_labels_and_their_own_taints(
    owner: str, tmp_path: Path
) -> None:
    nfd = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{
                        "key": "feature.node.kubernetes.io/pci-10de.present",
                        "operator": "In",
                        "values": ["true"],
                    }]},
                    {"matchExpressions": [{
                        "key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"],
                    }]},
                ]
            }
        }
    }
    values = tmp_path / "placement.yaml"
    values.write_text(
        "devicePlugin:\n"
        f"  nvidiaNodeSelector: null\n  affinity: {nfd}\n"
        "  extraTolerations: [{key: dedicated, value: gpu, effect: NoSchedule}]\n"
    )
    pod = pod_spec(one(template(values), "DaemonSet", owner))
    assert pod["affinity"] == nfd
    assert "nodeSelector" not in pod  # gpu=on no longer required
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},  # kept
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    ]
    plain = pod_spec(one(template(), "DaemonSet", owner))
    assert "affinity" not in plain and plain["nodeSelector"] == {"gpu": "on"}
    assert render_errors(values) == []


def test_security_contexts_take_an_selinux_type_over_the_chart_s_own(tmp_path: Path) -> None:
    values = tmp_path / "selinux.yaml"
    values.write_text(
        "devicePlugin:\n"
        "  podSecurityContext: {seLinuxOptions: {type: spc_t}}\n"
        "  containerSecurityContext:\n"
        "    {seLinuxOptions: {type: spc_t}, readOnlyRootFilesystem: false}\n"
    )
    objects = template(values)
    for owner in (one(objects, "DaemonSet", DEVICE_PLUGIN), one(objects, "DaemonSet", MONITOR)):
        pod = pod_spec(owner)["securityContext"]
        assert pod["seLinuxOptions"] == {"type": "spc_t"}
        assert (pod["runAsUser"], pod["seccompProfile"]) == (0, {"type": "RuntimeDefault"})
        for name, container in containers(owner).items():
            context = container["securityContext"]
            assert context["seLinuxOptions"] == {"type": "spc_t"}, name
            assert context["readOnlyRootFilesystem"] is False, name
            assert context["capabilities"] == {"drop": ["ALL"]}, name
            assert context["allowPrivilegeEscalation"] is False, name
    assert render_errors(values) == []


@pytest.mark.parametrize(
    ("kube_version", "api_versions", "rendered"),
    [
        ("1.30.2", (), False),  # the node claim is beta before 1.32: it can be off
        ("1.31.9", (), False),
        ("1.32.0", (), True),
        ("1.35.1", (), True),
        ("1.33.0", ("v1/Pod",), False),  # a cluster that does not serve v1 policies
        ("1.33.0", ("v1/Pod", POLICY_API), True),
    ],
)
def test_the_own_node_policy_is_rendered_where_every_pod_token_names_its_node(
    kube_version: str, api_versions: tuple[str, ...], rendered: bool
) -> None:
    def names(*settings: str) -> set[str]:
        objects = template(
            set_values=settings, kube_version=kube_version, api_versions=api_versions
        )
        return {o["metadata"]["name"] for o in objects if o["kind"] in ADMISSION_POLICY_KINDS}

    assert (OWN_NODE_POLICY in names()) is rendered
    assert OWN_NODE_POLICY not in names("devicePlugin.admissionPolicy.enabled=false")
    assert OWN_NODE_POLICY not in names("devicePlugin.enabled=false")
