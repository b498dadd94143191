"""A pod's hold on its cards once its init containers have finished.

Until then a pod holds, per card, the larger of any init container's claim and its app
containers' sum (`vgpu.domain.grant.pod_footprint`). Init containers never run again once they
have all succeeded, so from then on the pod holds only what its app containers use, plus what
its sidecars use: init containers with `restartPolicy: Always` keep running beside the app.

>>> from vgpu.domain.grant import DeviceGrant
>>> init = (DeviceGrant("GPU-a", "NVIDIA", 8000, 50),)
>>> app = (DeviceGrant("GPU-a", "NVIDIA", 2000, 10),)
>>> progress = InitProgress(count=1, finished=True)
>>> pod_hold((init, app), progress)
{'GPU-a': Usage(slices=1, memory=2000, cores=10)}
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vgpu.domain.device import Usage
from vgpu.domain.grant import (
    ContainerGrant,
    PodGrants,
    held_for_life,
    held_while_running,
)
from vgpu.domain.manifest import list_field, object_field


@dataclass(frozen=True, slots=True)
class InitProgress:
    """How many init containers the pod has, which of them are sidecars (by position), and
    whether every other one has succeeded."""

    count: int
    finished: bool = False
    sidecars: frozenset[int] = field(default_factory=frozenset)


def init_progress(manifest: Mapping[str, Any]) -> InitProgress:
    """Read a Pod manifest's init containers and `status.initContainerStatuses`.

    An init container is done when its status says it terminated with exit code 0; a pod
    without init containers has finished them. DomainError when a part that must be a list or
    an object is something else.
    """
    spec = object_field(manifest.get("spec"), "spec")
    status = object_field(manifest.get("status"), "status")
    specs = list_field(spec.get("initContainers"), "spec.initContainers")
    names = [str(object_field(c, "spec.initContainers[]").get("name", "")) for c in specs]
    sidecars = frozenset(
        i for i, c in enumerate(specs) if object_field(c, "").get("restartPolicy") == "Always"
    )
    statuses = {
        str(s.get("name", "")): s
        for s in (
            object_field(item, "status.initContainerStatuses[]")
            for item in list_field(
                status.get("initContainerStatuses"), "status.initContainerStatuses"
            )
        )
    }
    finished = all(
        _succeeded(statuses.get(name)) for i, name in enumerate(names) if i not in sidecars
    )
    return InitProgress(len(specs), finished, sidecars)


def pod_hold(grants: PodGrants, progress: InitProgress) -> dict[str, Usage]:
    """What the pod holds on each card now, given its init containers' progress
    (`Pod.init_progress`): what the scheduler's ledger counts for a placed pod.

    Before they finish: per card, the peak over each init container's turn (its claim plus the
    sidecars started before it) and the app phase (app containers plus every sidecar), which
    without sidecars is `pod_footprint`. After: the app phase alone.

    >>> from vgpu.domain.grant import DeviceGrant
    >>> init = (DeviceGrant("GPU-a", "NVIDIA", 8000, 50),)
    >>> app = (DeviceGrant("GPU-a", "NVIDIA", 2000, 10),)
    >>> pod_hold((init, app), InitProgress(count=1, finished=False))
    {'GPU-a': Usage(slices=1, memory=8000, cores=50)}
    """
    started: list[ContainerGrant] = []  # sidecars running so far, and MIG instances made
    peak: dict[str, Usage] = {}
    for index, container in enumerate(grants[: progress.count]):
        if index in progress.sidecars:
            started.append(container)
            continue
        started.append(held_for_life(container))  # the device plugin keeps it until the pod ends
        if not progress.finished:
            peak = _union(peak, _sum([*started, held_while_running(container)]))
    return _union(peak, _sum([*started, *grants[progress.count :]]))


def _sum(containers: Iterable[ContainerGrant]) -> dict[str, Usage]:
    total: dict[str, Usage] = {}
    for container in containers:
        for grant in container:
            total[grant.uuid] = total.get(grant.uuid, Usage()) + grant.usage
    return total


def _union(a: Mapping[str, Usage], b: Mapping[str, Usage]) -> dict[str, Usage]:
    merged = dict(a)
    for uuid, usage in b.items():
        merged[uuid] = merged.get(uuid, Usage()).union(usage)
    return merged


def hold_after_init(grants: PodGrants, progress: InitProgress) -> dict[str, Usage] | None:
    """The pod's smaller hold once it has init containers and they have all finished; None
    while they run (or when it has none): then `pod_footprint` is what it holds."""
    if progress.count == 0 or not progress.finished:
        return None
    return pod_hold(grants, progress)


def released_by_init(grants: PodGrants, progress: InitProgress) -> dict[str, Usage]:
    """What finishing the init containers frees on each card (cards with nothing freed are left
    out): the ledger subtracts this once the pod's `init_progress` turns finished."""
    before = pod_hold(grants, InitProgress(progress.count, False, progress.sidecars))
    after = pod_hold(grants, InitProgress(progress.count, True, progress.sidecars))
    freed = {uuid: usage - after.get(uuid, Usage()) for uuid, usage in before.items()}
    return {uuid: usage for uuid, usage in freed.items() if not usage.is_idle}


def _succeeded(status: Mapping[str, Any] | None) -> bool:
    if status is None:
        return False
    state = object_field(status.get("state"), "state")
    terminated = state.get("terminated")
    return isinstance(terminated, Mapping) and terminated.get("exitCode") == 0
