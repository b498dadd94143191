"""The device plugin's own-node policy in deploy/device-plugin/admission-policy.yaml, evaluated
for real (tests/unit/deploy/policy.py): a device plugin pod may change only the Node it runs on
and the pods bound to that node, as the node its service account token was issued on says."""

from typing import Any

import pytest

from tests.unit.deploy.policy import DEPLOY, AdmissionPolicy, documents

POLICY = AdmissionPolicy(DEPLOY / "device-plugin" / "admission-policy.yaml")
DEVICE_PLUGIN = "system:serviceaccount:vgpu-system:vgpu-device-plugin"
NODE_CLAIM = "authentication.kubernetes.io/node-name"


def request(resource: str, username: str = DEVICE_PLUGIN, node: str | None = "gpu-1") -> Any:
    extra = {NODE_CLAIM: [node]} if node is not None else {}
    return {
        "operation": "UPDATE",
        "resource": {"group": "", "version": "v1", "resource": resource},
        "userInfo": {"username": username, "extra": extra},
    }


def node(name: str, annotations: dict[str, str] | None = None) -> Any:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, **(
        {"annotations": annotations} if annotations else {})}}


def pod(node_name: str | None, phase: str = "allocating") -> Any:
    spec: dict[str, Any] = {"containers": []}
    if node_name is not None:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a",
                     "annotations": {"hami.io/bind-phase": phase}},
        "spec": spec,
    }


def denied(req: Any, obj: Any, old: Any) -> list[str]:
    return POLICY.evaluate(req, obj, old)[1]


def test_the_plugin_may_register_its_own_node_and_serve_the_pods_bound_to_it() -> None:
    registered = node("gpu-1", {"hami.io/node-nvidia-register": "[]"})
    assert denied(request("nodes"), registered, node("gpu-1")) == []
    assert denied(request("pods"), pod("gpu-1", "success"), pod("gpu-1")) == []


def test_the_plugin_may_not_change_another_node() -> None:
    [message] = denied(request("nodes"), node("gpu-2", {"x": "1"}), node("gpu-2"))
    assert message == "the device plugin on node gpu-1 may change only its own Node, not gpu-2"


@pytest.mark.parametrize("bound_to", ["gpu-2", None], ids=["another node's", "unbound"])
def test_the_plugin_may_not_change_a_pod_not_bound_to_its_node(bound_to: str | None) -> None:
    [message] = denied(request("pods"), pod(bound_to, "failed"), pod(bound_to))
    assert message == (
        "the device plugin on node gpu-1 may change only the pods bound to it, not team-a/p"
    )


def test_credentials_that_name_no_node_may_change_nothing() -> None:
    for resource, obj in (("nodes", node("gpu-1")), ("pods", pod("gpu-1"))):
        messages = denied(request(resource, node=None), obj, obj)
        assert any("name no node (authentication.kubernetes.io/node-name)" in m for m in messages)


def test_other_requesters_are_left_to_rbac() -> None:
    for username in ("system:serviceaccount:vgpu-system:vgpu-scheduler", "system:node:gpu-1"):
        assert denied(request("nodes", username, node=None), node("gpu-2"), node("gpu-2")) == []


def test_the_policy_matches_updates_of_nodes_and_pods_by_the_deployed_plugin_account() -> None:
    [rule] = POLICY.document["spec"]["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["UPDATE"] and set(rule["resources"]) == {"nodes", "pods"}
    assert POLICY.document["spec"]["failurePolicy"] == "Fail"
    assert POLICY.binding["spec"]["validationActions"] == ["Deny"]
    [account] = [
        d for d in documents(DEPLOY / "device-plugin" / "rbac.yaml")
        if d["kind"] == "ServiceAccount"
    ]
    meta = account["metadata"]
    assert f"system:serviceaccount:{meta['namespace']}:{meta['name']}" == DEVICE_PLUGIN
    [condition] = POLICY.document["spec"]["matchConditions"]
    assert f"'{DEVICE_PLUGIN}'" in " ".join(condition["expression"].split())
