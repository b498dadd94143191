"""The DRA driver's own-node policy in deploy/dra-driver/admission-policy.yaml, evaluated for
real (tests/unit/deploy/policy.py): a driver pod may create, update and delete only its driver's
ResourceSlices of the node its service account token was issued on."""

from typing import Any

import pytest

from tests.unit.deploy.policy import DEPLOY, AdmissionPolicy

POLICY = AdmissionPolicy(DEPLOY / "dra-driver" / "admission-policy.yaml")
DRIVER = "system:serviceaccount:vgpu-system:vgpu-dra-driver"


def request(operation: str, username: str = DRIVER, node: str | None = "gpu-1") -> Any:
    extra = {"authentication.kubernetes.io/node-name": [node]} if node is not None else {}
    return {
        "operation": operation,
        "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceslices"},
        "userInfo": {"username": username, "extra": extra},
    }


def resource_slice(node: str | None, driver: str = "gpu.vgpu.io") -> Any:
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": node or "all"}}
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": {"name": f"{node}-{driver}"}, "spec": spec}


def denied(operation: str, obj: Any, old: Any = None, **who: Any) -> list[str]:
    return POLICY.evaluate(request(operation, **who), obj, old)[1]


def test_the_driver_may_write_and_delete_its_own_nodes_slice() -> None:
    mine = resource_slice("gpu-1")
    assert denied("CREATE", mine) == []
    assert denied("UPDATE", mine, mine) == []
    assert denied("DELETE", None, mine) == []


@pytest.mark.parametrize(
    ("operation", "obj", "old"),
    [
        ("CREATE", resource_slice("gpu-2"), None),
        ("DELETE", None, resource_slice("gpu-2")),
        ("CREATE", resource_slice(None), None),  # a slice for every node
        ("CREATE", resource_slice("gpu-1", driver="nic.example.com"), None),
    ],
    ids=["another node's", "deleting another node's", "all nodes", "another driver's"],
)
def test_the_driver_may_not_write_other_slices(operation: str, obj: Any, old: Any) -> None:
    [message] = denied(operation, obj, old)
    assert message.startswith(
        "the DRA driver on node gpu-1 may write only the gpu.vgpu.io ResourceSlices of its own node"
    )


def test_the_driver_may_not_take_another_nodes_slice_over() -> None:
    [message] = denied("UPDATE", resource_slice("gpu-1"), resource_slice("gpu-2"))
    assert (
        message
        == "the DRA driver on node gpu-1 may not take over the ResourceSlice gpu-2-gpu.vgpu.io"
    )


def test_credentials_that_name_no_node_may_write_no_slice() -> None:
    messages = denied("CREATE", resource_slice("gpu-1"), node=None)
    assert any("name no node" in m for m in messages)


def test_other_requesters_are_left_to_rbac() -> None:
    assert denied("CREATE", resource_slice("gpu-2"), username="system:node:gpu-1", node=None) == []


def test_the_policy_matches_every_write_of_slices_and_denies() -> None:
    [rule] = POLICY.document["spec"]["matchConstraints"]["resourceRules"]
    assert set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE"}
    assert rule["resources"] == ["resourceslices"]
    assert POLICY.binding["spec"]["validationActions"] == ["Deny"]
