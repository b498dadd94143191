"""charts/vgpu's part of issue 17: grant signing and takeover from HAMi reach both processes'
settings, the admission policy trusts HAMi's service accounts during a takeover, the device
plugin keeps its state on the host, and the chart installs on the oldest Kubernetes it supports,
with the admission policy only where the API server has it."""

from pathlib import Path
from typing import Any

import celpy  # type: ignore[import-untyped]
import pytest
import yaml

from tests.e2e.deploy.render import (
    ADMISSION_POLICY_KINDS,
    CHART,
    DEVICE_PLUGIN,
    NAMESPACE,
    OLDEST,
    containers,
    helm,
    one,
    render_errors,
    schema_errors,
    template,
    template_args,
)
from vgpu.app.device_plugin.config import DevicePluginConfig
from vgpu.app.device_plugin.config import load_config as load_plugin_config
from vgpu.app.scheduler.config import SchedulerConfig
from vgpu.app.scheduler.config import load_config as load_scheduler_config

HAMI_SCHEDULER = "system:serviceaccount:kube-system:hami-scheduler"
HAMI_DEVICE_PLUGIN = "system:serviceaccount:kube-system:hami-device-plugin"
POLICY_API = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"


def settings(tmp_path: Path, *set_values: str) -> tuple[SchedulerConfig, DevicePluginConfig]:
    """Both processes' settings as rendered, loaded by their own loaders."""
    objects = template(set_values=set_values)
    scheduler = tmp_path / "scheduler.yaml"
    scheduler.write_text(one(objects, "ConfigMap", "vgpu-scheduler")["data"]["scheduler.yaml"])
    plugin = tmp_path / "plugin.yaml"
    plugin.write_text(one(objects, "ConfigMap", "vgpu-device-plugin")["data"]["config.yaml"])
    return (
        load_scheduler_config(scheduler, env={}),
        load_plugin_config(plugin, env={"NODE_NAME": "gpu-1"}),
    )


def trusted(objects: list[dict[str, Any]], username: str) -> bool:
    """The policy's `trusted` variable, evaluated as the API server would for `username`."""
    policy = one(objects, "ValidatingAdmissionPolicy", "vgpu-scheduler-owned-pod-keys")
    [expression] = [v["expression"] for v in policy["spec"]["variables"] if v["name"] == "trusted"]
    env = celpy.Environment()
    request = celpy.json_to_cel({"userInfo": {"username": username}})
    return bool(env.program(env.compile(expression)).evaluate({"request": request}))


def kinds(objects: list[dict[str, Any]]) -> set[str]:
    return {o["kind"] for o in objects}


def test_grant_signing_is_on_by_default_and_one_value_turns_it_off_in_both(
    tmp_path: Path,
) -> None:
    scheduler, plugin = settings(tmp_path)
    assert scheduler.signing.enabled is True and plugin.signing.enabled is True
    assert (scheduler.signing.secret_namespace, plugin.signing.secret_namespace) == (
        NAMESPACE,
        NAMESPACE,
    )
    scheduler, plugin = settings(tmp_path, "signing.enabled=false", "schedulerName=gpu-sched")
    assert scheduler.signing.enabled is False and plugin.signing.enabled is False
    # unsigned grants are served for the scheduler this chart runs, and for HAMi's
    assert set(plugin.signing.trusted_schedulers) == {"gpu-sched", "hami-scheduler"}


def test_takeover_from_hami_reaches_the_scheduler_and_the_device_plugin(tmp_path: Path) -> None:
    for config in settings(tmp_path):
        assert config.takeover.from_hami is False
    for config in settings(
        tmp_path, "takeover.fromHami=true", "takeover.hamiSchedulerName=hami-sched-2"
    ):
        assert config.takeover.from_hami is True
        assert config.takeover.hami_scheduler_names == ("hami-sched-2",)


def test_during_a_takeover_the_policy_lets_hami_s_scheduler_and_device_plugin_write() -> None:
    plain = template()
    taking_over = template(set_values=("takeover.fromHami=true",))
    for account in (HAMI_SCHEDULER, HAMI_DEVICE_PLUGIN):
        assert not trusted(plain, account)
        assert trusted(taking_over, account)
    for objects in (plain, taking_over):
        assert trusted(objects, f"system:serviceaccount:{NAMESPACE}:vgpu-scheduler")
        assert not trusted(objects, "system:serviceaccount:team-a:default")
    extra = template(
        set_values=(
            "takeover.fromHami=true",
            "takeover.hamiServiceAccounts={system:serviceaccount:hami:hami-vgpu-scheduler}",
            "scheduler.admissionPolicy.trustedUsers={ops:admin}",
        )
    )
    assert trusted(extra, "system:serviceaccount:hami:hami-vgpu-scheduler")
    assert trusted(extra, "ops:admin") and not trusted(extra, HAMI_SCHEDULER)


def test_the_device_plugin_keeps_its_state_in_a_host_directory_at_the_same_path(
    tmp_path: Path,
) -> None:
    for state_dir in ("/var/lib/vgpu", "/data/vgpu-state"):
        objects = template(set_values=(f"devicePlugin.stateDir={state_dir}",))
        pod = one(objects, "DaemonSet", DEVICE_PLUGIN)["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        plugin = containers(one(objects, "DaemonSet", DEVICE_PLUGIN))["device-plugin"]
        [mount] = [m for m in plugin["volumeMounts"] if m["mountPath"] == state_dir]
        assert volumes[mount["name"]]["hostPath"] == {
            "path": state_dir,
            "type": "DirectoryOrCreate",
        }
        assert not mount.get("readOnly")
        assert str(settings(tmp_path, f"devicePlugin.stateDir={state_dir}")[1].state_dir) == (
            state_dir
        )


def test_the_chart_needs_the_oldest_supported_kubernetes_and_refuses_older() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == f">={OLDEST}-0"
    older = helm(*template_args(kube_version="1.27.9"))
    assert older.returncode != 0 and "kubeVersion" in older.stderr


@pytest.mark.parametrize(
    ("kube_version", "api_versions", "policy"),
    [
        ("1.28.0", (), False),
        ("1.29.5", (), False),
        ("1.30.0", (), True),
        ("1.33.1", (), True),
        # against a cluster Helm lists every served kind: the policy follows the API server
        ("1.31.0", ("v1/Pod",), False),
        ("1.31.0", ("v1/Pod", POLICY_API), True),
    ],
)
def test_the_admission_policy_is_rendered_only_where_the_api_server_serves_it(
    kube_version: str, api_versions: tuple[str, ...], policy: bool
) -> None:
    objects = template(kube_version=kube_version, api_versions=api_versions)
    assert bool(kinds(objects) & ADMISSION_POLICY_KINDS) is policy
    if policy:
        assert kinds(objects) >= ADMISSION_POLICY_KINDS
    disabled = template(
        kube_version=kube_version,
        api_versions=api_versions,
        set_values=(
            "scheduler.admissionPolicy.enabled=false",
            "devicePlugin.admissionPolicy.enabled=false",
        ),
    )
    assert not kinds(disabled) & ADMISSION_POLICY_KINDS
    scheduler_only = template(
        kube_version=kube_version,
        api_versions=api_versions,
        set_values=("devicePlugin.admissionPolicy.enabled=false",),
    )
    assert bool(kinds(scheduler_only) & ADMISSION_POLICY_KINDS) is policy


def test_every_object_of_the_oldest_kubernetes_rendering_is_valid_there() -> None:
    objects = template(kube_version=OLDEST, set_values=("takeover.fromHami=true",))
    assert {"MutatingWebhookConfiguration", "DaemonSet", "Deployment"} <= kinds(objects)
    assert schema_errors(objects, (OLDEST,)) == []
    assert render_errors(set_values=("takeover.fromHami=true", "signing.enabled=false")) == []
