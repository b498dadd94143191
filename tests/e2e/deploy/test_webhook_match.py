"""The webhook's matchCondition (CEL), evaluated with cel-python on sample pods: it sends
exactly the pods that ask for vgpu resources. (The admission policy's CEL is evaluated by
tests/unit/deploy/test_admission_policy.py on deploy/, which is the chart rendered.)"""

from typing import Any

import celpy
import pytest

from tests.e2e.deploy.render import one, template


def evaluate(expression: str, activation: dict[str, Any]) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression)).evaluate(celpy.json_to_cel(activation))


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
