"""Every value of vgpu's values.yaml does something, and what it renders, the processes read.

A value no template reads is a setting that silently does nothing. For each key of
values.yaml: set to another value (a flipped flag, a number one higher, another enum member,
an example for lists and maps), the chart must render differently, on one of a few bases that
turn on the parts a key may depend on (secure metrics, the NetworkPolicy, NodePort Services
handed over from HAMi, the DRA mode where the chart has one, ...). And in every such rendering
the scheduler, the device plugin, the monitor and the DRA driver must load their settings from
what their containers get (arguments, environment, the ConfigMaps mounted), with their own
command-line parsers and loaders: a value rendered into a flag or a settings key that a
process does not take stops it at start.
"""

import argparse
import json
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.deploy.render import CHART, NAMESPACE, helm, template_args
from vgpu.app import cli
from vgpu.app.device_plugin import cli as plugin_cli
from vgpu.app.device_plugin.config import load_config as load_plugin
from vgpu.app.dra_driver import cli as dra_driver_cli
from vgpu.app.dra_driver.config import load_config as load_dra_driver
from vgpu.app.monitor import cli as monitor_cli
from vgpu.app.monitor.config import load_config as load_monitor
from vgpu.app.node_agent import NODE_AGENT_FLAGS
from vgpu.app.scheduler import cli as scheduler_cli
from vgpu.app.scheduler.config import load_config as load_scheduler

NEWEST = "1.34.0"
APIS = ("monitoring.coreos.com/v1", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")
FROM = {"metrics.networkPolicy.from": [{"namespaceSelector": {"matchLabels": {"a": "b"}}}]}
ON = {
    "metrics.secure.enabled": True,
    "metrics.networkPolicy.enabled": True,
    **FROM,
    "serviceMonitor.enabled": True,
    "dashboards.enabled": True,
    "devicePlugin.runtimeClassName": "nvidia",
    "devicePlugin.gpuOperatorToolkitReady.enabled": True,
    "takeover.fromHami": True,
    "scheduler.service.type": "NodePort",
    "devicePlugin.service.type": "NodePort",
    "scheduler.replicas": 2,
    "scheduler.combineScores": True,
}
BASES = {"default": {}, "parts on": ON, "HAMi gone": {**ON, "takeover.hamiInstalled": False}}
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
if "dra" in VALUES:  # the chart's DRA mode: the keys under dra act only with it on
    BASES["DRA on"] = {**ON, "dra.enabled": True}
# keys whose other value must be one the schema takes (an enum member, a pattern, an object)
OTHER = {
    "image.pullPolicy": "Always",
    "scheduler.kubeScheduler.image.pullPolicy": "Always",
    "devicePlugin.hamiCore.image.pullPolicy": "Always",
    "devices.nvidia.gpuCorePolicy": "force",
    "serviceMonitor.interval": "15s",
    "log.level": "DEBUG",
    "scheduler.overwriteEnv": "true",
    "devicePlugin.disablecorelimit": "true",
    "scheduler.nodeLockExpire": "6m",
    "scheduler.nodeHandshake.hamiVersion": "v2.8",
    "scheduler.nodeHandshake.period": "16s",
    "scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy": "spread",
    "scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy": "binpack",
    "scheduler.metricsBindAddress": ":9396",
    "scheduler.service.type": "NodePort",
    "devicePlugin.service.type": "NodePort",
    "scheduler.admissionWebhook.failurePolicy": "Ignore",
    "scheduler.admissionWebhook.reinvocationPolicy": "IfNeeded",
    "takeover.hamiServiceAccounts": ["system:serviceaccount:gpu:hami-scheduler"],
    "scheduler.extender.extraArgs": ["--debug"],
    "devicePlugin.extraArgs": ["--debug"],
    "devicePlugin.monitor.extraArgs": ["--debug"],
    "metrics.secure.readers": [{"kind": "ServiceAccount", "name": "p", "namespace": "m"}],
    "metrics.networkPolicy.from": [{"podSelector": {"matchLabels": {"c": "d"}}}],
    "scheduler.fragmentation.seedShapes": [{"gpus": 1, "memory": 1000}],
    "scheduler.fragmentation.typicalShapes": [{"gpus": 1, "memoryPercent": 50, "cpu": 4}],
    "scheduler.tolerations": [{"key": "k", "operator": "Exists"}],
    "devicePlugin.extraTolerations": [{"key": "k", "operator": "Exists"}],
    "scheduler.admissionWebhook.namespaceSelector.matchExpressions": [
        {"key": "a", "operator": "Exists"}
    ],
    "scheduler.admissionWebhook.objectSelector.matchExpressions": [
        {"key": "a", "operator": "Exists"}
    ],
    "dra.extendedResourceName": "example.com/gpu",
    "dra.gpuVisibility": "cdi",
    "dra.webhook.namespaces": "all",
    "dra.extraArgs": ["--debug"],
}
FIELD_REFS = {"spec.nodeName": "gpu-1", "metadata.namespace": NAMESPACE, "metadata.name": "pod-0"}


def value_keys(node: Any, above: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(node, dict) and node:
        for key, child in node.items():
            yield from value_keys(child, (*above, key))
    else:
        yield above, node


KEYS = dict(value_keys(VALUES))


def other_value(path: tuple[str, ...], value: Any) -> Any:
    dotted = ".".join(path)
    if dotted in OTHER:
        return OTHER[dotted]
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value / 2
    if isinstance(value, str):
        return f"{value}x" if value else "x"
    if isinstance(value, list):
        return [*value, "x"] if not value or isinstance(value[0], str) else value[:-1]
    return {"example.com/x": "y"}


def set_json(values: dict[str, Any]) -> tuple[str, ...]:
    """--set-json arguments, dotted keys' own dots escaped as Helm reads them."""
    return tuple(f"{k}={json.dumps(v)}" for k, v in values.items())


def rendered(values: dict[str, Any]) -> str | None:
    """The chart's output with these values set; None when it refuses them."""
    args = template_args(kube_version=NEWEST, api_versions=APIS)
    for item in set_json(values):
        args += ["--set-json", item]
    result = helm(*args)
    return result.stdout if result.returncode == 0 else None


@cache
def rendered_base(name: str) -> str | None:
    return rendered(BASES[name])


def escaped(path: tuple[str, ...]) -> str:
    return ".".join(part.replace(".", "\\.") for part in path)


# --- what each process loads from its container ------------------------------------------------

Load = Callable[[argparse.Namespace, dict[str, str]], Any]


def _node_agent(load: Any, flags: tuple[str, ...]) -> Load:
    def loaded(args: argparse.Namespace, env: dict[str, str]) -> Any:
        overrides = {name: getattr(args, name, None) for name in (*NODE_AGENT_FLAGS, *flags)}
        return load(args.config, env, overrides)

    return loaded


PROCESSES: dict[str, Load] = {
    "scheduler": lambda args, env: load_scheduler(args.config, env, scheduler_cli._overrides(args)),
    "device-plugin": _node_agent(load_plugin, plugin_cli._FLAGS),
    "monitor": _node_agent(load_monitor, monitor_cli._FLAGS),
    "dra-driver": _node_agent(load_dra_driver, dra_driver_cli._FLAGS),
}


def process_settings(text: str, work: Path) -> dict[str, Any]:
    """Per vgpu container (`<workload>/<container>`), the settings its process loads."""
    found = {}
    objects = [o for o in yaml.safe_load_all(text) if o]
    maps = {o["metadata"]["name"]: o.get("data", {}) for o in objects if o["kind"] == "ConfigMap"}
    for workload in (o for o in objects if o["kind"] in ("Deployment", "DaemonSet")):
        pod = workload["spec"]["template"]["spec"]
        mounts = _config_maps(pod, maps, work / workload["metadata"]["name"])
        for container in pod["containers"]:
            words = container.get("args") or []
            if not words or words[0] not in PROCESSES:
                continue
            words = [_in_folders(word, mounts) for word in words]
            env = {e["name"]: _env_value(e) for e in container.get("env", [])}
            key = f"{workload['metadata']['name']}/{container['name']}"
            found[key] = PROCESSES[words[0]](cli.parse(words), env)
    return found


def _in_folders(word: str, mounts: dict[str, Path]) -> str:
    """`--flag=<path>` with a path under a mounted ConfigMap made the path of its copy."""
    flag, equals, value = word.partition("=")
    for mount, folder in mounts.items():
        if equals and value.startswith(f"{mount}/"):
            return f"{flag}={folder}{value[len(mount):]}"
    return word


def _config_maps(
    pod: dict[str, Any], maps: dict[str, dict[str, str]], work: Path
) -> dict[str, Path]:
    """mountPath -> a folder holding the files of the ConfigMaps a volume mounted there shows
    (a configMap volume, or a projected one of ConfigMaps)."""
    files = {volume["name"]: _volume_files(volume, maps) for volume in pod["volumes"]}
    folders = {}
    for container in pod["containers"]:
        for mount in container.get("volumeMounts", []):
            shown = files.get(mount["name"])
            if shown and "subPath" not in mount:
                folder = work / mount["name"]
                folder.mkdir(parents=True, exist_ok=True)
                for name, data in shown.items():
                    (folder / name).write_text(data)
                folders[mount["mountPath"]] = folder
    return folders


def _volume_files(volume: dict[str, Any], maps: dict[str, dict[str, str]]) -> dict[str, str]:
    sources = [volume] if "configMap" in volume else volume.get("projected", {}).get("sources", [])
    files = {}
    for source in sources:
        if "configMap" not in source:
            continue
        data = maps.get(source["configMap"]["name"], {})  # another's: not ours to check
        items = source["configMap"].get("items") or [{"key": k, "path": k} for k in data]
        files.update({item["path"]: data[item["key"]] for item in items if item["key"] in data})
    return files


def _env_value(item: dict[str, Any]) -> str:
    if "value" in item:
        return str(item["value"])
    return FIELD_REFS[item["valueFrom"]["fieldRef"]["fieldPath"]]


# --- tests -------------------------------------------------------------------------------------


def test_the_processes_settings_are_read_from_the_containers_as_rendered(tmp_path: Path) -> None:
    text = rendered({})
    assert text is not None
    settings = process_settings(text, tmp_path)
    assert set(settings) == {
        "vgpu-scheduler/vgpu",
        "vgpu-device-plugin/device-plugin",
        "vgpu-monitor/vgpu-monitor",
    }
    assert settings["vgpu-device-plugin/device-plugin"].node_name == "gpu-1"
    assert settings["vgpu-scheduler/vgpu"].extender.port == 8888


@pytest.mark.parametrize("path", list(KEYS), ids=[".".join(p) for p in KEYS])
def test_every_value_changes_what_is_rendered_and_the_processes_still_start(
    path: tuple[str, ...], tmp_path: Path
) -> None:
    dotted, other = ".".join(path), other_value(path, KEYS[path])
    for name, base in BASES.items():
        before = rendered_base(name)
        after = rendered({**base, escaped(path): KEYS[path] if base.get(dotted) == other else other})
        if before is None or after is None:
            continue
        process_settings(after, tmp_path / name)  # raises when a process would not start
        if after != before:
            return
    pytest.fail(f"{dotted}={json.dumps(other)} changes nothing the chart renders")
