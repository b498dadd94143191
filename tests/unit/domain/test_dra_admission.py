"""The webhook's DRA mode, in the domain: which claims a pod's `nvidia.com/gpu*` requests become
and how the pod is changed, so HAMi users' pod specs run on DRA nodes unchanged."""

from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import kubernetes_validate
import pytest

from tests.unit.domain.builders import container, manifest
from vgpu.domain import AdmissionConfig, AdmissionDecision
from vgpu.domain.device import Device
from vgpu.domain.dra import (
    GPU_REQUEST,
    DeviceRequest,
    DraAdmissionConfig,
    DraPod,
    ExactDeviceRequest,
    PodClaims,
    screen_dra_pod,
    translate_pod,
)

CONFIG = DraAdmissionConfig(AdmissionConfig(scheduler_name="vgpu-scheduler"))
CARDS = [
    Device("GPU-1", 0, "NVIDIA A100-SXM4-80GB", 1, 81920),
    Device("GPU-2", 0, "NVIDIA T4", 1, 16384),
]
MIB = 2**20


def translate(
    pod: dict[str, Any], config: DraAdmissionConfig = CONFIG, namespace: str = "ml"
) -> PodClaims:
    screened = screen_dra_pod(pod, namespace, config)
    assert isinstance(screened, DraPod), screened
    result = translate_pod(screened, CARDS, config)
    assert isinstance(result, PodClaims), result
    return result


def decide(pod: dict[str, Any]) -> AdmissionDecision:
    screened = screen_dra_pod(pod, "ml", CONFIG)
    if isinstance(screened, AdmissionDecision):
        return screened
    result = translate_pod(screened, CARDS, CONFIG)
    return result if isinstance(result, AdmissionDecision) else result.decision


def patched(pod: dict[str, Any], result: PodClaims) -> dict[str, Any]:
    found: dict[str, Any] = jsonpatch.apply_patch(pod, list(result.decision.patch))
    return found


def test_a_hami_pod_gets_a_claim_per_gpu_container_and_keeps_no_vgpu_resource() -> None:
    raw = container(gpu=1, mem=20000, cores=30, cpu="2")
    raw["resources"]["requests"] = {"nvidia.com/gpu": 1, "cpu": "1"}
    pod = manifest(raw, namespace="ml")

    result = translate(pod)

    (template,) = result.templates
    assert template.claim.namespace == "ml" and template.claim.name.startswith("vgpu-")
    assert template.claim.requests == (
        DeviceRequest(
            GPU_REQUEST,
            exactly=ExactDeviceRequest(
                "gpu.vgpu.io", count=1, capacity={"cores": 30, "memory": 20000 * MIB}
            ),
        ),
    )
    assert template.description == "1 GPU, each 20000 MiB and 30% of the cores"
    after = patched(pod, result)
    assert after["spec"]["resourceClaims"] == [
        {"name": "vgpu-main", "resourceClaimTemplateName": template.claim.name}
    ]
    resources = after["spec"]["containers"][0]["resources"]
    assert resources == {
        "limits": {"cpu": "2"},
        "requests": {"cpu": "1"},
        "claims": [{"name": "vgpu-main"}],
    }
    assert "schedulerName" not in after["spec"]  # kube-scheduler allocates claims
    assert "main -> vgpu-main" in result.decision.message


def test_pods_that_ask_alike_share_a_template_and_others_do_not() -> None:
    first = translate(manifest(container(gpu=1, mem=20000), name="a"))
    second = translate(manifest(container("worker", gpu=1, mem=20000), name="b"))
    other = translate(manifest(container(gpu=1, mem=10000), name="c"))
    other_namespace = translate(manifest(container(gpu=1, mem=20000)), namespace="team")

    assert first.templates[0].claim.name == second.templates[0].claim.name
    assert first.templates[0].claim.name != other.templates[0].claim.name
    assert other_namespace.templates[0].key == f"team/{first.templates[0].claim.name}"


def test_each_app_container_gets_its_own_claim_even_when_they_ask_alike() -> None:
    pod = manifest(container("a", gpu=1, mem=1000), container("b", gpu=1, mem=1000))

    result = translate(pod)

    after = patched(pod, result)
    entries = after["spec"]["resourceClaims"]
    assert [e["name"] for e in entries] == ["vgpu-a", "vgpu-b"]
    assert len({e["resourceClaimTemplateName"] for e in entries}) == 1
    assert len(result.templates) == 1
    claims = [c["resources"]["claims"] for c in after["spec"]["containers"]]
    assert claims == [[{"name": "vgpu-a"}], [{"name": "vgpu-b"}]]


def test_a_plain_init_container_reuses_a_claim_that_asks_the_same_and_a_sidecar_never_does() -> (
    None
):
    warmup = container("warmup", init=True, gpu=1, mem=1000)
    sidecar = container("proxy", init=True, gpu=1, mem=1000)
    sidecar["restartPolicy"] = "Always"
    setup = container("setup", init=True, gpu=1, mem=500)
    pod = manifest(warmup, sidecar, setup, container("main", gpu=1, mem=1000))

    after = patched(pod, translate(pod))

    init = after["spec"]["initContainers"]
    assert [c["resources"]["claims"] for c in init] == [
        [{"name": "vgpu-main"}],  # runs alone before main: main's claim is free then
        [{"name": "vgpu-proxy"}],  # runs beside main
        [{"name": "vgpu-setup"}],  # asks for less: its own claim
    ]
    names = [e["name"] for e in after["spec"]["resourceClaims"]]
    assert sorted(names) == ["vgpu-main", "vgpu-proxy", "vgpu-setup"]


def test_a_pod_that_names_claims_keeps_them_and_ours_take_free_names() -> None:
    raw = container("main", gpu=1, mem=1000)
    raw["resources"]["claims"] = [{"name": "vgpu-main"}]
    pod = manifest(
        raw, resourceClaims=[{"name": "vgpu-main", "resourceClaimTemplateName": "nic"}]
    )

    result = translate(pod)

    after = patched(pod, result)
    assert [e["name"] for e in after["spec"]["resourceClaims"]] == ["vgpu-main", "vgpu-0"]
    assert after["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == "nic"
    claims = after["spec"]["containers"][0]["resources"]["claims"]
    assert claims == [{"name": "vgpu-main"}, {"name": "vgpu-0"}]
    assert "the pod's own claims are kept" in result.decision.message


def test_a_container_name_that_cannot_name_an_entry_gets_its_position() -> None:
    pod = manifest(container("x" * 60, gpu=1), container("Main", gpu=1))

    after = patched(pod, translate(pod))

    assert [e["name"] for e in after["spec"]["resourceClaims"]] == ["vgpu-0", "vgpu-1"]


def test_priority_and_core_policy_become_variables_as_in_device_plugin_mode() -> None:
    config = DraAdmissionConfig(AdmissionConfig(gpu_core_policy="force", overwrite_env=True))
    pod = manifest(container("main", gpu=1, priority=1), container("sidecar", cpu="1"))

    after = patched(pod, translate(pod, config))

    main, side = after["spec"]["containers"]
    assert main["env"] == [
        {"name": "CUDA_TASK_PRIORITY", "value": "1"},
        {"name": "GPU_CORE_UTILIZATION_POLICY", "value": "force"},
    ]
    assert main["resources"]["limits"] == {}
    assert side["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]


def test_the_claims_depend_on_the_cards_only_for_a_percentage_or_a_card_type() -> None:
    def screened(pod: dict[str, Any]) -> DraPod:
        found = screen_dra_pod(pod, "ml", CONFIG)
        assert isinstance(found, DraPod)
        return found

    assert not screened(manifest(container(gpu=1, mem=1000))).needs_cards
    assert not screened(manifest(container(gpu=2))).needs_cards  # whole cards
    assert screened(manifest(container(gpu=1, pct=50))).needs_cards
    typed = manifest(container(gpu=1), annotations={"nvidia.com/use-gputype": "A100"})
    assert screened(typed).needs_cards

    (template,) = translate(manifest(container(gpu=1, pct=50))).templates
    sizes = [s.capacity["memory"] for s in template.claim.requests[0].first_available]
    assert sizes == [40960 * MIB, 8192 * MIB]


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (
            manifest(container(gpu=1), annotations={"nvidia.com/vgpu-mode": "mig"}),
            "cannot write the pod's GPU request as a claim",
        ),
        (manifest(container(gpu=1, pct=150)), "nvidia.com/gpumem-percentage=150"),
        (manifest(container(gpu=1), nodeName="node-a"), "node 'node-a' assigned"),
        (
            manifest(container(gpu=1), annotations={"hami.io/gpu-scheduler-policy": "odd"}),
            "odd",
        ),
    ],
)
def test_what_cannot_become_a_claim_is_denied_with_the_reason(
    pod: dict[str, Any], message: str
) -> None:
    decision = decide(pod)
    assert not decision.allowed and message in decision.message


def test_a_privileged_gpu_container_is_denied_as_in_device_plugin_mode() -> None:
    raw = container("cuda", gpu=1)
    raw["securityContext"] = {"privileged": True}
    decision = decide(manifest(raw))
    assert not decision.allowed and "container 'cuda' is privileged" in decision.message


def test_pods_of_any_scheduler_are_translated_and_gpu_less_pods_left_alone() -> None:
    other = decide(manifest(container(gpu=1), schedulerName="volcano"))
    assert other.allowed and "became claims" in other.message

    plain = decide(manifest(container(cpu="1")))
    assert plain.allowed and not plain.mutates


def test_a_pod_asking_for_zero_gpus_loses_the_vgpu_resources_and_gets_no_claim() -> None:
    pod = manifest(container(gpu=0, mem=1000))

    decision = decide(pod)

    after = jsonpatch.apply_patch(pod, list(decision.patch))
    assert after["spec"]["containers"][0]["resources"]["limits"] == {}
    assert "resourceClaims" not in after["spec"]


def test_scheduler_owned_annotations_go_in_dra_mode_too() -> None:
    pod = manifest(container(gpu=1), annotations={"hami.io/vgpu-node": "n1", "team": "ml"})

    after = jsonpatch.apply_patch(pod, list(decide(pod).patch))

    assert after["metadata"]["annotations"] == {"team": "ml"}


def test_the_namespace_comes_from_the_review_when_the_pod_names_none() -> None:
    pod = manifest(container(gpu=1))
    del pod["metadata"]["namespace"]

    (template,) = translate(pod, namespace="team-b").templates

    assert template.claim.namespace == "team-b"


def test_a_driver_and_class_of_the_settings_are_asked_for() -> None:
    config = DraAdmissionConfig(AdmissionConfig(), driver="gpu.example.com", device_class="gpus")

    (template,) = translate(manifest(container(gpu=1, pct=50)), config).templates

    (first, _) = template.claim.requests[0].first_available
    assert first.device_class_name == "gpus"
    assert 'device.capacity["gpu.example.com"]' in first.selectors[0]


@pytest.mark.parametrize("version", ["1.34", "1.36"])
@pytest.mark.parametrize(
    "asks",
    [{"gpu": 1, "mem": 20000, "cores": 30}, {"gpu": 2, "pct": 25}, {"gpu": 1}],
    ids=["memory", "percentage", "whole"],
)
def test_the_template_is_a_valid_resource_claim_template(
    version: str, asks: dict[str, Any]
) -> None:
    pod = manifest(container(**asks), annotations={"nvidia.com/numa-bind": "true"})
    (template,) = translate(pod).templates

    kubernetes_validate.validate(template.manifest(), version, strict=True)


def test_a_stored_template_matches_when_it_asks_the_same_as_the_api_server_wrote_it() -> None:
    (template,) = translate(manifest(container(gpu=1, mem=20000, cores=30))).templates
    stored = template.manifest()
    request = stored["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    request.update(allocationMode="ExactCount", count=1)  # the API server's defaults
    request["capacity"]["requests"]["memory"] = "20000Mi"  # the same amount, spelt otherwise
    stored["metadata"]["uid"] = "u1"

    assert template.matches(stored)
    request["capacity"]["requests"]["memory"] = "40000Mi"
    assert not template.matches(stored)
    assert not template.matches({"spec": {"spec": "garbage"}})
