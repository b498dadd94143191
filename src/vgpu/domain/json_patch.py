"""RFC 6902 JSON patch pieces the webhook answers with: pointers to a pod's containers and
the operations that add variables or list items to them."""

from collections.abc import Mapping
from typing import Any


def container_slots(spec: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(JSON pointer, raw container) for every container, init containers first."""
    return [
        (f"/spec/{kind}/{i}", raw)
        for kind in ("initContainers", "containers")
        for i, raw in enumerate(spec.get(kind) or [])
    ]


def escape(name: str) -> str:
    """`name` as one JSON pointer token (`nvidia.com/gpu` -> `nvidia.com~1gpu`)."""
    return name.replace("~", "~0").replace("/", "~1")


def env_patches(base: str, raw: Mapping[str, Any], env: Mapping[str, str]) -> list[dict[str, Any]]:
    """Add the variables of `env` the container at `base` does not set already."""
    existing = {e.get("name") for e in raw.get("env") or [] if isinstance(e, Mapping)}
    items = [{"name": k, "value": v} for k, v in env.items() if k not in existing]
    return append_patches(base, raw, "env", items)


def append_patches(
    base: str, raw: Mapping[str, Any], field: str, items: list[Any]
) -> list[dict[str, Any]]:
    """Append `items` to the list `field` of the object at `base` (`raw` as it is now),
    making the list when it is missing or empty."""
    if not items:
        return []
    if raw.get(field):
        return [{"op": "add", "path": f"{base}/{field}/-", "value": item} for item in items]
    return [{"op": "add", "path": f"{base}/{field}", "value": items}]
