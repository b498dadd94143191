"""Small builders for domain tests: pods as Kubernetes manifests, cards, node views."""

from typing import Any

from vgpu.domain import Device, MigPlacement, MigProfile, Pod, pod_from_manifest

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


def a100_mig_profiles() -> tuple[MigProfile, ...]:
    """An A100-SXM4-80GB's GPU instance profiles as NVML reports them (8 memory slices)."""

    def profile(name: str, slices: int, memory: int, core: int, starts: range) -> MigProfile:
        size = 8 if slices == 7 else slices + (slices == 3)
        placements = tuple(MigPlacement(s, size) for s in starts)
        return MigProfile(name, slices, memory, core, placements)

    return (
        profile("7g.80gb", 7, 80896, 100, range(0, 1)),
        profile("4g.40gb", 4, 40192, 58, range(0, 1)),
        profile("3g.40gb", 3, 40192, 43, range(0, 5, 4)),
        profile("2g.20gb", 2, 19968, 29, range(0, 5, 2)),
        profile("1g.10gb", 1, 9856, 15, range(0, 7)),
    )


def mig_card(uuid: str = "GPU-mig", index: int = 0, **kw: Any) -> Device:
    """An A100-80GB in MIG mode, as HAMi v2.10's device plugin registers it."""
    values: dict[str, Any] = {
        "type": "NVIDIA A100-SXM4-80GB",
        "count": 7,
        "memory": 81920,
        "mode": "mig",
        "mig_profiles": a100_mig_profiles(),
    }
    values.update(kw)
    return Device(uuid=uuid, index=index, **values)
