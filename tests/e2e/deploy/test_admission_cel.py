"""The chart's CEL, evaluated on sample requests with cel-python (a CEL interpreter): the
webhook's matchCondition sends exactly the pods that ask for vgpu resources, and the
ValidatingAdmissionPolicy lets only vgpu's service accounts write grant annotations."""

from typing import Any

import celpy
import pytest

from tests.e2e.deploy.render import NAMESPACE, one, template

SCHEDULER = f"system:serviceaccount:{NAMESPACE}:vgpu-scheduler"
PLUGIN = f"system:serviceaccount:{NAMESPACE}:vgpu-device-plugin"
USER = "alice@example.com"


def evaluate(expression: str, activation: dict[str, Any]) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression)).evaluate(celpy.json_to_cel(activation))


def pod(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "namespace": "default"}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": {"containers": [{"name": "c"}], **spec}}


def container(**resources: dict[str, Any]) -> dict[str, Any]:
    return {"name": "c", "resources": resources}


@pytest.mark.parametrize(
    ("spec", "sent"),
    [
        ({"containers": [container(limits={"nvidia.com/gpu": 1})]}, True),
        ({"containers": [container(limits={"nvidia.com/gpumem-percentage": 50})]}, True),
        ({"containers": [container(requests={"nvidia.com/gpucores": 30})]}, True),
        ({"containers": [{"name": "c"}],
          "initContainers": [container(limits={"nvidia.com/gpumem": 1000})]}, True),
        ({"containers": [container(limits={"cpu": "1"}), {"name": "d"}]}, False),
        ({"containers": [{"name": "c"}], "initContainers": [{"name": "i"}]}, False),
    ],
    ids=["gpu", "gpumem-percentage", "requests-only", "init-container", "cpu-only", "no-resources"],
)
def test_the_webhook_sees_exactly_the_pods_that_ask_for_vgpu_resources(
    spec: dict[str, Any], sent: bool
) -> None:
    [hook] = one(template(), "MutatingWebhookConfiguration")["webhooks"]
    [condition] = hook["matchConditions"]
    assert bool(evaluate(condition["expression"], {"object": {"spec": spec}})) is sent


def test_renamed_resources_reach_the_match_condition() -> None:
    objects = template(set_values=("resourceMem=example.com/vmem",))
    [hook] = one(objects, "MutatingWebhookConfiguration")["webhooks"]
    spec = {"containers": [container(limits={"example.com/vmem": 1000})]}
    assert evaluate(hook["matchConditions"][0]["expression"], {"object": {"spec": spec}})


def admitted(user: str, new: dict[str, Any], old: dict[str, Any] | None) -> bool:
    policy = one(template(), "ValidatingAdmissionPolicy")["spec"]
    activation: dict[str, Any] = {
        "object": new, "oldObject": old,
        "request": {"userInfo": {"username": user}, "operation": "CREATE" if old is None else "UPDATE"},
    }
    variables: dict[str, Any] = {}
    for variable in policy["variables"]:
        variables[variable["name"]] = evaluate(variable["expression"],
                                               {**activation, "variables": variables})
    [rule] = policy["validations"]
    return bool(evaluate(rule["expression"], {**activation, "variables": variables}))


GRANT = {"hami.io/vgpu-devices-allocated": "GPU-1,NVIDIA,20000,80:;",
         "hami.io/vgpu-node": "gpu-1"}


@pytest.mark.parametrize(
    ("user", "old", "new", "allowed"),
    [
        (SCHEDULER, {}, GRANT, True),
        (PLUGIN, GRANT, {**GRANT, "hami.io/bind-phase": "success"}, True),
        (USER, {}, GRANT, False),
        (USER, None, {"hami.io/bind-phase": "success"}, False),  # a CREATE with a forged phase
        (USER, None, {"example.com/team": "ml"}, True),
        (USER, GRANT, {**GRANT, "example.com/team": "ml"}, True),
        (USER, GRANT, {"hami.io/vgpu-node": "gpu-1"}, False),  # removing a grant
        (USER, {}, {"vgpu.io/grant-signature": "forged"}, False),
        (USER, {}, {"hami.io/mlu-devices-to-allocate": "x"}, False),
        (USER, {}, {"hami.io/webhook": "ignore"}, True),
    ],
    ids=["scheduler-grants", "plugin-phase", "user-grant", "user-create-phase", "user-create-other",
         "user-other-beside-grant", "user-removes", "user-signature", "other-vendor", "user-label-like"],
)
def test_only_vgpu_service_accounts_write_grant_annotations(
    user: str, old: dict[str, str] | None, new: dict[str, str], allowed: bool
) -> None:
    old_pod = None if old is None else pod(old)
    assert admitted(user, pod(new), old_pod) is allowed


def test_a_pod_without_annotations_is_admitted() -> None:
    assert admitted(USER, pod(None), pod(None)) is True
    assert admitted(USER, pod(None), None) is True


def test_the_denial_names_the_annotations_and_the_user() -> None:
    [rule] = one(template(), "ValidatingAdmissionPolicy")["spec"]["validations"]
    message = evaluate(rule["messageExpression"], {"request": {"userInfo": {"username": USER}}})
    assert "hami.io/vgpu-*" in message and message.endswith(f"{USER} may not")
