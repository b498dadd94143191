"""The webhook's DRA mode through the real `vgpu scheduler` over HTTPS, against the API
emulator: a HAMi pod spec is sent to `/webhook/dra`, the templates appear in the pod's
namespace, and the claims made from them (as kube-controller-manager makes them) are allocated
by the domain's allocator (as kube-scheduler allocates them) on the slice the DRA driver
publishes for its node.
"""

from pathlib import Path
from typing import Any

from tests.e2e.k8s_emulator import RunningApiServer, pod_manifest
from tests.e2e.scheduler.conftest import Launch
from tests.e2e.scheduler.harness import SchedulerProcess, admission_review
from vgpu.domain.dra import (
    GpuCard,
    allocate,
    device_class_json,
    gpu_device,
    gpu_device_class,
    node_slice,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
    resource_slice_json,
)
from vgpu.domain.dra.outcome import Allocation

GROUP = "/apis/resource.k8s.io/v1"
SLICES = f"{GROUP}/resourceslices"
CLASSES = f"{GROUP}/deviceclasses"
TEMPLATES = f"{GROUP}/namespaces/ml/resourceclaimtemplates"
CLAIMS = f"{GROUP}/namespaces/ml/resourceclaims"
NODE = "gpu-node-1"
GIB = 2**30
CARDS = [
    GpuCard("GPU-a", 0, "NVIDIA A100-SXM4-80GB", 81920),
    GpuCard("GPU-b", 1, "NVIDIA A100-SXM4-80GB", 81920, numa_node=1),
]


def start(launch: Launch, api: RunningApiServer, tmp_path: Path, **env: str) -> SchedulerProcess:
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    return launch("--kubeconfig", str(kubeconfig), env=env, tls=True)


def hami_pod(name: str) -> dict[str, Any]:
    """A HAMi user's pod: half a card's memory and 30% of its cores for `train`, 8000 MiB for
    the `eval` sidecar container, a CPU-only `log` container."""
    return pod_manifest(
        "ml",
        name,
        containers=[
            {
                "name": "train",
                "image": "cuda",
                "resources": {
                    "limits": {
                        "nvidia.com/gpu": 1,
                        "nvidia.com/gpumem-percentage": 50,
                        "nvidia.com/gpucores": 30,
                        "cpu": "4",
                    }
                },
            },
            {
                "name": "eval",
                "image": "cuda",
                "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 8000}},
            },
            {"name": "log", "image": "busybox"},
        ],
    )


def made_claims(api: RunningApiServer, pod: dict[str, Any]) -> list[dict[str, Any]]:
    """What kube-controller-manager does for a pod with templated claims: one claim per entry."""
    made = []
    for entry in pod["spec"]["resourceClaims"]:
        template = api.get(f"{TEMPLATES}/{entry['resourceClaimTemplateName']}")
        assert template is not None, entry
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": f"{pod['metadata']['name']}-{entry['name']}", "namespace": "ml"},
            "spec": template["spec"]["spec"],
        }
        made.append(api.create(CLAIMS, claim))
    return made


def test_a_hami_pod_becomes_claims_that_kube_scheduler_allocates_on_the_drivers_slice(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    k8s_api.create(SLICES, resource_slice_json(node_slice(NODE, [gpu_device(c) for c in CARDS])))
    k8s_api.create(CLASSES, device_class_json(gpu_device_class()))
    scheduler = start(launch, k8s_api, tmp_path)

    pod = scheduler.admit(hami_pod("job-1"), path="/webhook/dra")
    k8s_api.create("/api/v1/namespaces/ml/pods", pod)

    train, eval_, log = pod["spec"]["containers"]
    assert train["resources"] == {"limits": {"cpu": "4"}, "claims": [{"name": "vgpu-train"}]}
    assert eval_["resources"] == {"limits": {}, "claims": [{"name": "vgpu-eval"}]}
    assert "resources" not in log and "schedulerName" not in pod["spec"]
    assert len(k8s_api.list_items(TEMPLATES)) == 2

    claims = [parse_resource_claim(c) for c in made_claims(k8s_api, pod)]
    outcome = allocate(
        claims,
        NODE,
        [parse_resource_slice(s) for s in k8s_api.list_items(SLICES)],
        [parse_device_class(c) for c in k8s_api.list_items(CLASSES)],
    )

    assert isinstance(outcome, Allocation), outcome
    consumed = [
        {k.rpartition("/")[2]: v for k, v in result.results[0].consumed_capacity.items()}
        for result in outcome.results
    ]
    assert consumed == [{"memory": 40 * GIB, "cores": 30}, {"memory": 8000 * 2**20, "cores": 0}]


def test_a_second_pod_alike_reuses_the_templates_and_a_foreign_one_of_that_name_denies(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    k8s_api.create(SLICES, resource_slice_json(node_slice(NODE, [gpu_device(c) for c in CARDS])))
    scheduler = start(launch, k8s_api, tmp_path)
    first = scheduler.admit(hami_pod("job-1"), path="/webhook/dra")
    scheduler.admit(hami_pod("job-2"), path="/webhook/dra")
    assert len(k8s_api.requests("POST", TEMPLATES)) == 2  # made once, then found

    name = first["spec"]["resourceClaims"][1]["resourceClaimTemplateName"]
    stored = k8s_api.get(f"{TEMPLATES}/{name}")
    assert stored is not None
    k8s_api.delete(f"{TEMPLATES}/{name}")
    stored["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 4
    del stored["metadata"]["resourceVersion"], stored["metadata"]["uid"]
    k8s_api.create(TEMPLATES, stored)
    response = scheduler.review(hami_pod("job-3"), path="/webhook/dra")

    assert not response["allowed"] and response["status"]["code"] == 403
    assert f"ResourceClaimTemplate ml/{name} exists and asks for something other" in (
        response["status"]["message"]
    )


def test_a_template_create_whose_answer_is_lost_still_admits_the_pod(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    scheduler = start(launch, k8s_api, tmp_path, VGPU_DRA__API_TIMEOUT="0.5")
    k8s_api.delay("POST", "/resourceclaimtemplates", 3.0)  # applied, answered too late

    pod = pod_manifest("ml", "job", limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000})
    admitted = scheduler.admit(pod, path="/webhook/dra")

    (entry,) = admitted["spec"]["resourceClaims"]
    assert k8s_api.get(f"{TEMPLATES}/{entry['resourceClaimTemplateName']}") is not None


def test_a_dry_run_makes_no_template(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    scheduler = start(launch, k8s_api, tmp_path)
    pod = pod_manifest("ml", "job", limits={"nvidia.com/gpu": 1})

    response = scheduler.client.post("/webhook/dra", json=_dry_run_review(pod)).json()
    assert response["response"]["allowed"] and "patch" in response["response"]
    assert k8s_api.list_items(TEMPLATES) == []


def _dry_run_review(pod: dict[str, Any]) -> dict[str, Any]:
    review = admission_review(pod, "admission.k8s.io/v1")
    review["request"]["dryRun"] = True
    return review
