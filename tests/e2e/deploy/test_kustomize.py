"""deploy/ (kubectl apply -k) is the chart rendered with deploy/values.yaml, and its kustomize
output is valid and free of the defects issue 10 found in the hand-written files."""

from typing import Any

import pytest

from tests.e2e.deploy.render import (
    ADMISSION_POLICY_KINDS,
    DEVICE_PLUGIN,
    NEWEST,
    OLDEST,
    REPO,
    containers,
    deploy_differences,
    kustomize,
    one,
    schema_errors,
)

DIRECTORIES = ("scheduler", "device-plugin", "dra-driver")
# the oldest Kubernetes each directory applies to: DRA's objects need resource.k8s.io/v1
OLDEST_FOR = {"dra-driver": "1.34.0"}


def rendered(directory: str) -> list[dict[str, Any]]:
    return kustomize(REPO / "deploy" / directory)


def test_deploy_is_exactly_the_chart_rendering() -> None:
    assert deploy_differences() == []


@pytest.mark.parametrize("directory", DIRECTORIES)
def test_kustomize_output_is_valid_for_the_oldest_and_newest_kubernetes(directory: str) -> None:
    objects = rendered(directory)
    assert len(objects) >= 5
    assert schema_errors(objects, (NEWEST,)) == []
    # before 1.30 the API server has no v1 admission policy: docs/install.md says to leave
    # admission-policy.yaml out there; everything else applies as it is
    older = [o for o in objects if o["kind"] not in ADMISSION_POLICY_KINDS]
    assert schema_errors(older, (OLDEST_FOR.get(directory, OLDEST),)) == []


def test_the_auth_reader_binding_stays_in_kube_system() -> None:
    binding = one(rendered("scheduler"), "RoleBinding", "vgpu-scheduler-auth-reader")
    assert binding["metadata"]["namespace"] == "kube-system"


def test_an_apply_never_blanks_the_webhook_ca_bundle() -> None:
    hooks = one(rendered("scheduler"), "MutatingWebhookConfiguration")["webhooks"]
    assert [h["name"] for h in hooks] == ["vgpu.hami.io", "dra.vgpu.hami.io"]
    assert not [h for h in hooks if "caBundle" in h["clientConfig"]]


def test_the_device_plugin_may_write_root_owned_host_directories() -> None:
    plugin = one(rendered("device-plugin"), "DaemonSet", DEVICE_PLUGIN)["spec"]["template"]["spec"]
    assert plugin["securityContext"]["runAsUser"] == 0
    assert "runAsNonRoot" not in plugin["securityContext"]


def test_a_rollout_keeps_a_ready_scheduler_so_the_webhook_never_goes_missing() -> None:
    objects = rendered("scheduler")
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert containers(deployment)["vgpu"]["readinessProbe"]["httpGet"]["path"] == "/healthz"


def test_the_scheduler_cluster_role_grants_no_unused_verbs() -> None:
    role = one(rendered("scheduler"), "ClusterRole", "vgpu-scheduler")
    verbs = {(res, verb) for rule in role["rules"] for res in rule["resources"]
             for verb in rule["verbs"]}
    assert not {v for _, v in verbs} & {"update", "delete", "deletecollection", "*"}
    assert ("resourcequotas", "get") not in verbs and ("events", "patch") not in verbs


def test_every_directory_creates_the_namespace_it_installs_into() -> None:
    for directory in DIRECTORIES:
        objects = rendered(directory)
        namespace = one(objects, "Namespace")["metadata"]
        assert namespace["labels"]["hami.io/webhook"] == "ignore"
        assert {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"} <= {
            namespace["name"], "kube-system", None
        }
