"""Small builders for domain tests: pods as Kubernetes manifests, cards, node views."""

from typing import Any

from vgpu.domain import Device, Pod, pod_from_manifest

A40_UUIDS = ("GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448", "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec")


def card(uuid: str, index: int = 0, **kw: Any) -> Device:
    values: dict[str, Any] = {"type": "NVIDIA A40", "count": 10, "memory": 46068}
    values.update(kw)
    return Device(uuid=uuid, index=index, **values)


def a40_cards() -> list[Device]:
    return [card(u, i) for i, u in enumerate(A40_UUIDS)]


def container(name: str = "main", init: bool = False, **limits: Any) -> dict[str, Any]:
    names = {
        "gpu": "nvidia.com/gpu",
        "mem": "nvidia.com/gpumem",
        "pct": "nvidia.com/gpumem-percentage",
        "cores": "nvidia.com/gpucores",
        "priority": "nvidia.com/priority",
    }
    raw: dict[str, Any] = {"name": name, "image": "cuda"}
    if limits:
        raw["resources"] = {"limits": {names.get(k, k): v for k, v in limits.items()}}
    if init:
        raw["_init"] = True
    return raw


def manifest(
    *containers: dict[str, Any],
    name: str = "pod",
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    init = [{k: v for k, v in c.items() if k != "_init"} for c in containers if c.get("_init")]
    app = [c for c in containers if not c.get("_init")]
    body: dict[str, Any] = {"containers": app, **spec}
    if init:
        body["initContainers"] = init
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
        "spec": body,
    }


def pod(*containers: dict[str, Any], **kw: Any) -> Pod:
    return pod_from_manifest(manifest(*containers, **kw))
