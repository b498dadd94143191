"""Read-modify-write of a node's annotations, safe against other writers of the node.

The write is a JSON merge patch that carries the `metadata.resourceVersion` it was computed
from, so a node changed in between (a kubelet status update, another scheduler's lock) makes it
fail with 409 Conflict instead of overwriting what it did not see; the node is then read again
and the change computed anew (up to `ATTEMPTS` tries, 100 ms doubling with jitter between).
"""

from collections.abc import Callable, Iterator, Mapping

from vgpu.adapters.kubernetes.api import KubeApi, object_path
from vgpu.adapters.kubernetes.backoff import retry_delays
from vgpu.ports.cluster import Conflict, NodeUpdate

ATTEMPTS = 5


def update_node_annotations(
    api: KubeApi, name: str, update: NodeUpdate, sleep: Callable[[float], None]
) -> dict[str, object] | None:
    """Write what `update` makes of the node's annotations; returns the patched node, or None
    when `update` had nothing to write. Conflict when the node kept changing, NotFound when it
    is gone."""
    path = object_path("/api/v1/nodes", name)
    for delay in tries():
        meta = api.get(path).get("metadata") or {}
        changes = update(meta.get("annotations") or {})
        if not changes:
            return None
        try:
            return api.merge_patch(path, annotation_patch(meta, changes))
        except Conflict:
            if delay is None:
                break
            sleep(delay)
    raise Conflict(f"node {name}: annotations not written after {ATTEMPTS} tries, it kept changing")


def annotation_patch(
    meta: Mapping[str, object], annotations: Mapping[str, str | None]
) -> dict[str, object]:
    """A merge patch of `annotations` that applies only to the node version `meta` describes."""
    return {
        "metadata": {
            "resourceVersion": meta.get("resourceVersion"),
            "annotations": dict(annotations),
        }
    }


def tries() -> Iterator[float | None]:
    """One item per try: the delay before the next try, None on the last."""
    yield from retry_delays(ATTEMPTS)
    yield None
