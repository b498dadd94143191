"""A tenant's forged grant goes through the real webhook and is gone (issue 8, items 2 and 9).

The test plays kube-apiserver: it sends the pod to `/webhook`, stores what the patch leaves, and
binds it as the default scheduler would; the real `vgpu scheduler` must not count the forgery.
"""

import json
from pathlib import Path

from tests.e2e.k8s_emulator import RunningApiServer, node_manifest, pod_manifest
from tests.e2e.scheduler.conftest import Launch
from tests.e2e.scheduler.harness import admission_review, wait_until
from tests.e2e.scheduler.test_fake_cluster import write_cluster
from tests.e2e.scheduler.test_kubernetes import A40, A40_REGISTER, NODES, pods, start

WHOLE_CARD = f"{A40[0]},NVIDIA,46068,100:;"
FORGED = {
    "hami.io/vgpu-node": "node1",
    "hami.io/vgpu-devices-allocated": WHOLE_CARD,
    "hami.io/vgpu-devices-to-allocate": WHOLE_CARD,
    "hami.io/bind-phase": "success",
    "hami.io/bind-time": "0",
    "vgpu.io/grant-signature": "k1:forged",
}


def test_a_gpu_less_pod_with_forged_grants_is_admitted_without_them_and_charges_nothing(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    k8s_api.create(
        NODES, node_manifest("node1", annotations={"hami.io/node-nvidia-register": A40_REGISTER})
    )
    scheduler = start(launch, k8s_api, tmp_path)
    forged = pod_manifest(
        "default",
        "forger",
        annotations={**FORGED, "team": "ml"},
        labels={"hami.io/vgpu-node": "node1"},
    )

    admitted = scheduler.admit(forged)
    admitted["spec"]["nodeName"] = "node1"  # placed by the default scheduler
    k8s_api.create(pods(), admitted)

    assert admitted["metadata"]["annotations"] == {"team": "ml"}
    assert admitted["metadata"]["labels"] == {}
    assert wait_until(lambda: "removed scheduler-owned annotations" in scheduler.logs())
    # both cards are still free for pods that ask the scheduler
    for name in ("whole-1", "whole-2"):
        pod = k8s_api.create(
            pods(), scheduler.admit(pod_manifest("default", name, limits={"nvidia.com/gpu": 1}))
        )
        reply = scheduler.filter(pod, ["node1"])
        assert reply["NodeNames"] == ["node1"], reply


def test_a_hostile_quantity_is_denied_and_the_scheduler_keeps_serving(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    scheduler = start(launch, k8s_api, tmp_path)
    for value in ("1e999999Gi", "9" * 5000, "1e-999999999"):
        hostile = pod_manifest("default", "p", limits={"nvidia.com/gpumem": value})
        response = scheduler.review(hostile)
        assert response["allowed"] is False
        assert response["status"]["code"] == 403
        assert "container 'main': nvidia.com/gpumem=" in response["status"]["message"]
    assert scheduler.alive()


def test_an_unreadable_review_is_denied_with_its_uid_over_a_real_socket(
    launch: Launch, tmp_path: Path
) -> None:
    """kube-apiserver takes a reply without its uid as a failed call; a 5000-digit number or a
    body over the limit must still be answered as this review's denial."""
    scheduler = launch("--fake-cluster", write_cluster(tmp_path))
    review = admission_review(pod_manifest("default", "p"), "admission.k8s.io/v1")
    text = json.dumps(review).replace('"dryRun": false', '"dryRun": ' + "9" * 5000)
    oversize = json.dumps({**review, "pad": "x" * (3 << 20)})
    for body, says in ((text, "number too large"), (oversize, "over the 1048576 byte limit")):
        reply = scheduler.client.post("/webhook", content=body).json()
        answer = reply["response"]
        assert (answer["uid"], answer["allowed"]) == (review["request"]["uid"], False)
        assert says in answer["status"]["message"]
    assert f"review {review['request']['uid']} denied" in scheduler.logs()
    assert scheduler.review(pod_manifest("default", "q"))["allowed"] is True  # still serving
