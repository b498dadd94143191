"""The device plugin's pod in the chart: probed on its health port (one no other vgpu or HAMi
listener uses), and, with the monitor's pod, held back until the GPU operator's toolkit is ready
when HAMi's `gpuOperatorToolkitReady` says so."""

from typing import Any

import yaml

from tests.e2e.deploy.render import (
    DEVICE_PLUGIN,
    HAMI_VALUES,
    MONITOR,
    containers,
    one,
    render_errors,
    template,
)
from vgpu.app.cli import parse
from vgpu.app.device_plugin.config import load_config
from vgpu.app.settings import host_and_port

TOOLKIT = (
    "devicePlugin.gpuOperatorToolkitReady.enabled=true",
    "devicePlugin.gpuOperatorToolkitReady.hostPath=/run/gpu-operator/validations",
)


def _hami_ports() -> set[int]:
    """Every port HAMi's values name, and those HAMi's templates fix (its monitor's container
    port 9394, its scheduler's metrics target 9395)."""
    found: set[int] = {9394, 9395}

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, dict):
            for name, value in node.items():
                walk(value, str(name))
        elif isinstance(node, list):
            for item in node:
                walk(item, key)
        elif isinstance(node, int) and "port" in key.lower():
            found.add(node)

    walk(yaml.safe_load(HAMI_VALUES.read_text()))
    return found


def test_the_plugin_is_probed_on_its_health_endpoint_at_the_port_it_serves_it() -> None:
    plugin = containers(one(template(), "DaemonSet", DEVICE_PLUGIN))["device-plugin"]

    args = parse(plugin["args"])
    settings = load_config(env={"NODE_NAME": "n"}, overrides={"health_listen": args.health_listen})
    assert host_and_port(settings.health_listen) == ("0.0.0.0", 9397)
    assert plugin["ports"] == [{"name": "health", "containerPort": 9397}]
    assert plugin["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert plugin["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}

    moved = containers(
        one(template(set_values=("devicePlugin.healthPort=9500",)), "DaemonSet", DEVICE_PLUGIN)
    )
    assert "--health-listen=:9500" in moved["device-plugin"]["args"]
    assert moved["device-plugin"]["ports"] == [{"name": "health", "containerPort": 9500}]


def test_the_health_port_is_no_port_of_vgpu_s_other_listeners_nor_of_hami_s_chart() -> None:
    objects = template(HAMI_VALUES)
    taken = _hami_ports() | {9396, 8888}  # vgpu explain, the extender
    for owner in (o for o in objects if o["kind"] in ("Deployment", "DaemonSet")):
        for name, container in containers(owner).items():
            if name != "device-plugin":
                taken |= {p["containerPort"] for p in container.get("ports", [])}
    for service in (o for o in objects if o["kind"] == "Service"):
        taken |= {p["port"] for p in service["spec"]["ports"]}
        taken |= {p["nodePort"] for p in service["spec"]["ports"] if "nodePort" in p}

    plugin = containers(one(objects, "DaemonSet", DEVICE_PLUGIN))["device-plugin"]
    health = plugin["ports"][0]["containerPort"]

    assert {31992, 31993, 31998, 9394, 9395} <= taken
    assert health not in taken


def test_the_monitor_is_ready_once_it_reads_the_gpus() -> None:
    monitor = containers(one(template(), "DaemonSet", MONITOR))["vgpu-monitor"]

    assert monitor["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert monitor["livenessProbe"]["httpGet"]["path"] == "/healthz"


def _pods(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The plugin's and the monitor's pod specs, by DaemonSet."""
    return {name: one(objects, "DaemonSet", name)["spec"]["template"]["spec"]
            for name in (DEVICE_PLUGIN, MONITOR)}


def test_without_gpu_operator_toolkit_ready_no_pod_waits_for_the_toolkit() -> None:
    for name, pod in _pods(template(HAMI_VALUES)).items():
        waits = [c["name"] for c in pod.get("initContainers", [])]
        assert "toolkit-validation" not in waits, name
        assert "nvidia-validations" not in {v["name"] for v in pod["volumes"]}, name


def test_gpu_operator_toolkit_ready_holds_both_pods_until_the_toolkit_ready_file_exists() -> None:
    pods = _pods(template(set_values=TOOLKIT))

    assert [c["name"] for c in pods[DEVICE_PLUGIN]["initContainers"]] == [
        "toolkit-validation", "hami-core"
    ]
    assert [c["name"] for c in pods[MONITOR]["initContainers"]] == ["toolkit-validation"]
    for pod in pods.values():
        wait = pod["initContainers"][0]
        script = wait["command"][-1]
        assert wait["command"][:2] == ["/bin/sh", "-c"]
        assert "until [ -f /run/gpu-operator/validations/toolkit-ready ]" in script
        assert wait["volumeMounts"] == [
            {
                "name": "nvidia-validations",
                "mountPath": "/run/gpu-operator/validations",
                "mountPropagation": "HostToContainer",
                "readOnly": True,
            }
        ]
        [volume] = [v for v in pod["volumes"] if v["name"] == "nvidia-validations"]
        assert volume["hostPath"] == {
            "path": "/run/gpu-operator/validations",
            "type": "DirectoryOrCreate",
        }
        assert wait["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert wait["securityContext"]["allowPrivilegeEscalation"] is False
    assert render_errors(set_values=TOOLKIT) == []


def test_the_toolkit_wait_takes_the_node_containers_security_context_values() -> None:
    settings = (*TOOLKIT, "devicePlugin.containerSecurityContext.seLinuxOptions.type=spc_t")

    for pod in _pods(template(set_values=settings)).values():
        wait = pod["initContainers"][0]
        assert wait["securityContext"]["seLinuxOptions"] == {"type": "spc_t"}
        assert wait["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_hami_s_toolkit_wait_security_context_is_honoured() -> None:
    settings = (*TOOLKIT, "devicePlugin.hamiCore.enabled=false")

    for pod in _pods(template(HAMI_VALUES, set_values=settings)).values():
        [wait] = pod["initContainers"]
        assert wait["name"] == "toolkit-validation"
        assert wait["securityContext"] == {"privileged": True, "runAsUser": 0}  # HAMi's values
