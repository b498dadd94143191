"""The ValidatingAdmissionPolicy in deploy/scheduler/admission-policy.yaml, evaluated for real
(tests/unit/deploy/policy.py evaluates the shipped CEL)."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.deploy.policy import DEPLOY, AdmissionPolicy, documents
from vgpu.domain.trust.scheduler_owned import is_scheduler_owned_annotation

POLICY_FILE = DEPLOY / "scheduler" / "admission-policy.yaml"
SCHEDULER = "system:serviceaccount:vgpu-system:vgpu-scheduler"
DEVICE_PLUGIN = "system:serviceaccount:vgpu-system:vgpu-device-plugin"  # deploy/ is rendered from charts/vgpu
TENANT = "system:serviceaccount:team-a:default"
KUBELET = "system:node:gpu-1"
GRANT = "GPU-a,NVIDIA,8000,30:;"
SHIPPED = AdmissionPolicy(POLICY_FILE)
POLICY = SHIPPED.document


def pod(annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> Any:
    metadata: dict[str, Any] = {"name": "p", "namespace": "team-a"}
    if annotations is not None:
        metadata["annotations"] = annotations
    if labels is not None:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": []}}


def _evaluate(username: str, obj: Any, old: Any) -> tuple[dict[str, Any], list[str]]:
    """(variables, messages of the validations that fail) for one admission request."""
    operation = "CREATE" if old is None else "UPDATE"
    return SHIPPED.evaluate({"operation": operation, "userInfo": {"username": username}}, obj, old)


def denied(username: str, obj: Any, old: Any = None) -> list[str]:
    return _evaluate(username, obj, old)[1]


GRANTED = pod(
    {
        "hami.io/vgpu-node": "gpu-1",
        "hami.io/vgpu-time": "1705054796",
        "hami.io/vgpu-devices-to-allocate": GRANT,
        "hami.io/vgpu-devices-allocated": GRANT,
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1705054797",
        "vgpu.io/grant-signature": "k1:c2lnbmF0dXJl",
        "team": "ml",
    },
    {"hami.io/vgpu-node": "gpu-1", "app": "train"},
)


def test_a_tenant_cannot_create_a_pod_with_a_forged_grant() -> None:
    forged = pod(
        {"hami.io/vgpu-devices-to-allocate": "GPU-a,NVIDIA,32768,100:;", "hami.io/bind-time": "0"},
        {"hami.io/webhook": "ignore"},
    )
    [message] = denied(TENANT, forged)
    assert "hami.io/vgpu-*" in message


@pytest.mark.parametrize(
    "key", ["hami.io/vgpu-node", "hami.io/dcu-devices-allocated", "vgpu.io/grant-signature"]
)
def test_any_scheduler_owned_annotation_on_create_is_denied(key: str) -> None:
    assert denied(TENANT, pod({key: "x"}))


def test_the_vgpu_node_label_on_create_is_denied() -> None:
    [message] = denied(TENANT, pod({}, {"hami.io/vgpu-node": "gpu-1"}))
    assert "label hami.io/vgpu-node" in message


@pytest.mark.parametrize(
    "clean",
    [
        pod(),  # no annotations or labels at all
        pod({"hami.io/gpu-scheduler-policy": "spread", "nvidia.com/use-gputype": "A40"}),
        pod({"team": "ml"}, {"hami.io/webhook": "ignore", "app": "train"}),
    ],
)
def test_a_tenant_may_create_a_clean_pod(clean: Any) -> None:
    assert denied(TENANT, clean) == []


def test_the_scheduler_may_write_the_grant_and_label() -> None:
    assert denied(SCHEDULER, GRANTED, old=pod({"team": "ml"}, {"app": "train"})) == []


def test_a_tenant_cannot_raise_its_own_grant() -> None:
    raised = pod(
        {
            **GRANTED["metadata"]["annotations"],
            "hami.io/vgpu-devices-to-allocate": "GPU-a,NVIDIA,32768,100:;",
        },
        GRANTED["metadata"]["labels"],
    )
    assert denied(TENANT, raised, old=GRANTED)


@pytest.mark.parametrize(
    "key", ["vgpu.io/grant-signature", "hami.io/vgpu-devices-allocated", "hami.io/bind-phase"]
)
def test_a_tenant_cannot_remove_a_scheduler_owned_annotation(key: str) -> None:
    annotations = {k: v for k, v in GRANTED["metadata"]["annotations"].items() if k != key}
    assert denied(TENANT, pod(annotations, GRANTED["metadata"]["labels"]), old=GRANTED)


def test_a_tenant_cannot_move_or_drop_the_vgpu_node_label() -> None:
    annotations = GRANTED["metadata"]["annotations"]
    moved = pod(annotations, {**GRANTED["metadata"]["labels"], "hami.io/vgpu-node": "gpu-2"})
    dropped = pod(annotations, {"app": "train"})
    assert denied(TENANT, moved, old=GRANTED) and denied(TENANT, dropped, old=GRANTED)


def test_a_tenant_may_change_unrelated_annotations_and_labels_of_a_granted_pod() -> None:
    changed = pod(
        {**GRANTED["metadata"]["annotations"], "team": "vision", "note": "new"},
        {**GRANTED["metadata"]["labels"], "app": "serve"},
    )
    assert denied(TENANT, changed, old=GRANTED) == []
    assert denied(KUBELET, GRANTED, old=GRANTED) == []  # e.g. a status update


def test_the_device_plugin_may_rewrite_to_allocate_and_bind_phase() -> None:
    served = pod(
        {
            **GRANTED["metadata"]["annotations"],
            "hami.io/vgpu-devices-to-allocate": ";",
            "hami.io/bind-phase": "success",
        },
        GRANTED["metadata"]["labels"],
    )
    assert denied(DEVICE_PLUGIN, served, old=GRANTED) == []


@pytest.mark.parametrize(
    "key",
    [
        "hami.io/vgpu-node",
        "hami.io/vgpu-mig-allocations",
        "hami.io/bind-time",
        "hami.io/cambricon-mlu-devices-to-allocate",
        "hami.io/-devices-",
        "vgpu.io/grant-signature",
        "vgpu.io/grant-signature-old",
        "hami.io/gpu-scheduler-policy",
        "hami.io/device-scoring-weights",
        "hami.io/webhook",
        "example.com/vgpu-node",
        "xhami.io/vgpu-node",
        "nvidia.com/use-gpuuuid",
    ],
)
def test_the_policy_and_the_webhook_agree_on_which_annotations_are_owned(key: str) -> None:
    variables, _ = _evaluate(TENANT, pod({key: "x"}), None)
    assert (key in list(variables["ownedKeys"])) is is_scheduler_owned_annotation(key)


def test_the_trusted_users_are_the_deployed_service_accounts() -> None:
    def account(path: Path) -> str:
        [sa] = [d for d in documents(path) if d["kind"] == "ServiceAccount"]
        return f"system:serviceaccount:{sa['metadata']['namespace']}:{sa['metadata']['name']}"

    trusted = next(v for v in POLICY["spec"]["variables"] if v["name"] == "trusted")
    assert account(DEPLOY / "scheduler" / "rbac.yaml") == SCHEDULER
    assert account(DEPLOY / "device-plugin" / "rbac.yaml") == DEVICE_PLUGIN
    assert f"'{SCHEDULER}'" in trusted["expression"]
    assert f"'{DEVICE_PLUGIN}'" in trusted["expression"]


def test_the_policy_is_bound_to_deny_on_pod_create_and_update_and_is_deployed() -> None:
    rules = POLICY["spec"]["matchConstraints"]["resourceRules"]
    assert POLICY["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert POLICY["spec"]["failurePolicy"] == "Fail"
    assert any(
        {"CREATE", "UPDATE"} <= set(r["operations"]) and "pods" in r["resources"] for r in rules
    )
    binding = SHIPPED.binding
    assert binding["spec"]["policyName"] == POLICY["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    kustomization = yaml.safe_load((DEPLOY / "scheduler" / "kustomization.yaml").read_text())
    assert "admission-policy.yaml" in kustomization["resources"]
