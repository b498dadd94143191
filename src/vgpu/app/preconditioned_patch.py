"""Annotation patches on a pod as last read, with an outcome the caller knows.

The scheduler's grant writes and the device plugin's Allocate patch both decide on a pod they
read, so both write through `patch_preconditioned`:

- the patch carries that read's resourceVersion, so a write based on a superseded read fails
  (409) instead of winning;
- on a 409 the pod is read again, and the patch retried once on the fresh version only when
  the pod is the same one (uid) and what the caller depends on is unchanged (`unchanged`);
- an ambiguous failure (timeout, reset, 5xx) is settled, where the caller asks (`settle`), by
  reading the pod live: the annotations are there or they are not. When that read fails too, or
  the caller does not settle, the outcome is UNKNOWN.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from vgpu.domain.pod import Pod
from vgpu.ports.cluster import ClusterError, ClusterPort, Conflict, Rejected

Notes = Mapping[str, str | None]
Unchanged = Callable[[Pod, Pod], bool]
"""Whether a retry would still act on what the caller decided: (the pod as decided on, the
pod as read after the 409, same uid)."""


class Outcome(Enum):
    WRITTEN = "written"
    REFUSED = "refused"  # the API did not apply it
    UNKNOWN = "unknown"  # it may or may not have been applied; nobody could tell


@dataclass(frozen=True, slots=True)
class Written:
    outcome: Outcome
    detail: str = ""  # why it was refused or is unknown


def patch_preconditioned(
    cluster: ClusterPort,
    pod: Pod,
    annotations: Notes,
    labels: Notes | None = None,
    *,
    unchanged: Unchanged,
    settle: bool = True,
    before_write: Callable[[], None] = lambda: None,
) -> Written:
    """Patch `pod` as last read (see the module's description). `before_write` runs before
    each attempt and may refuse it by raising Rejected (the scheduler's leader fence)."""
    version = pod.resource_version or None
    for attempt in (1, 2):
        try:
            before_write()
            cluster.patch_pod_annotations(
                pod.namespace, pod.name, annotations, labels, resource_version=version
            )
            return Written(Outcome.WRITTEN)
        except Conflict as exc:
            current = read_live(cluster, pod)
            if isinstance(current, Written):
                return current
            if attempt == 2 or current is None or current.uid != pod.uid:
                return Written(Outcome.REFUSED, str(exc))
            if not unchanged(pod, current):
                return Written(Outcome.REFUSED, str(exc))
            version = current.resource_version
        except Rejected as exc:
            return Written(Outcome.REFUSED, str(exc))
        except ClusterError as exc:
            if not settle:
                return Written(Outcome.UNKNOWN, str(exc))
            return _settled(cluster, pod, annotations, exc)
    raise AssertionError("unreachable: the second attempt always returns")


def read_live(cluster: ClusterPort, pod: Pod) -> Pod | Written | None:
    """The pod live from the API (None: gone); an UNKNOWN Written when it cannot be read."""
    try:
        return cluster.read_pod(pod.namespace, pod.name)
    except ClusterError as exc:
        return Written(Outcome.UNKNOWN, f"reading pod {pod.key} back failed: {exc}")


def _settled(cluster: ClusterPort, pod: Pod, annotations: Notes, exc: ClusterError) -> Written:
    """What an ambiguous failure did, read from the pod: written when it shows the patch."""
    current = read_live(cluster, pod)
    if isinstance(current, Written):
        return Written(Outcome.UNKNOWN, f"{exc}; {current.detail}")
    if current is not None and current.uid == pod.uid and _shows(current, annotations):
        return Written(Outcome.WRITTEN)
    return Written(Outcome.REFUSED, str(exc))


def _shows(pod: Pod, annotations: Notes) -> bool:
    """Whether the pod carries exactly what the patch wrote (None: key absent)."""
    return all(pod.annotations.get(key) == value for key, value in annotations.items())
