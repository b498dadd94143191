"""`vgpu scheduler --fake-cluster FILE` over real HTTP(S), as kube-scheduler would call it."""

from pathlib import Path

import httpx

from tests.e2e.scheduler.conftest import Launch

A40 = ("GPU-03f69c50-207a-2038-9b45-23cac89cb67d", "GPU-1afede84-4e70-2174-49af-f07ebb94d1ae")
CLUSTER = f"""
nodes:
  - name: node1
    annotations:
      hami.io/node-nvidia-register: "{A40[0]},10,46068,100,NVIDIA-NVIDIA A40,0,true:{A40[1]},10,46068,100,NVIDIA-NVIDIA A40,0,true:"
"""


def pod(name: str, **limits: object) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": "vgpu-scheduler",  # the extender acts only on its own pods
            "containers": [
                {"name": "main", "image": "cuda:12", "resources": {"limits": dict(limits)}}
            ],
        },
        "status": {"phase": "Pending"},
    }


def write_cluster(tmp_path: Path) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    return str(path)


def test_the_a40_example_from_webhook_to_bind(tmp_path: Path, launch: Launch) -> None:
    scheduler = launch("--fake-cluster", write_cluster(tmp_path))
    admitted = scheduler.admit(
        pod(
            "gpu-pod",
            **{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 20000, "nvidia.com/gpucores": 80},
        )
    )
    assert admitted["spec"]["schedulerName"] == "vgpu-scheduler"
    reply = scheduler.filter(admitted, ["node1"])
    assert reply == {
        "Nodes": None,
        "NodeNames": ["node1"],
        "FailedNodes": None,
        "FailedAndUnresolvableNodes": None,
        "Error": "",
    }
    assert scheduler.bind(admitted, "node1") == ""
    assert sorted(scheduler.metric("hami_gpu_memory_allocated_bytes")) == [0, 20000 * 2**20]
    assert sorted(scheduler.metric("hami_gpu_core_allocated_ratio")) == [0, 80]
    assert scheduler.metric("hami_vgpu_memory_allocated_bytes", pod="gpu-pod") == [20000 * 2**20]
    assert scheduler.metric("vgpu_scheduler_request_duration_seconds_count", verb="filter") == [1]


def test_https_with_the_given_certificate(tmp_path: Path, launch: Launch) -> None:
    scheduler = launch("--fake-cluster", write_cluster(tmp_path), tls=True)
    assert scheduler.url.startswith("https://")
    admitted = scheduler.admit(pod("p", **{"nvidia.com/gpu": 1}))
    assert scheduler.filter(admitted, ["node1"])["NodeNames"] == ["node1"]
    plain = httpx.Client(base_url=scheduler.url.replace("https", "http"), timeout=5)
    try:
        plain.get("/healthz")
        raised = False
    except httpx.HTTPError:
        raised = True
    finally:
        plain.close()
    assert raised  # plain HTTP is not served on the TLS port


def test_garbage_gets_protocol_errors_and_leaves_the_ledger_alone(
    tmp_path: Path, launch: Launch
) -> None:
    scheduler = launch("--fake-cluster", write_cluster(tmp_path))
    c = scheduler.extender
    for path in ("/filter", "/bind"):
        for body in (b"", b"\x00\xff", b"{", b"[]", b'{"Pod": 5}', b"x" * (2 << 20)):
            response = c.post(path, content=body, headers={"Content-Type": "application/json"})
            assert response.status_code == 200, (path, body[:20], response.text)
            assert response.json()["Error"], (path, body[:20])
    assert c.post("/prioritize", content=b"{").status_code == 400
    reply = scheduler.client.post("/webhook", content=b'{"apiVersion": 1}').json()
    assert reply["response"]["allowed"] is False
    assert "field apiVersion" in reply["response"]["status"]["message"]
    assert scheduler.metric("hami_gpu_memory_allocated_bytes") == [0, 0]
    assert scheduler.alive()
    admitted = scheduler.admit(pod("after", **{"nvidia.com/gpu": 1}))
    assert scheduler.filter(admitted, ["node1"])["NodeNames"] == ["node1"]
    assert "Traceback" not in c.post("/filter", content=b"{").text
