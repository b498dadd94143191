"""Which pod and container a cache directory belongs to, and which directories are stale.

Metrics follow HAMi's monitor: only pods labelled `hami.io/vgpu-node=<this node>` count, and a
directory `<pod uid>_<container>` belongs to the pod with that UID if it has an app container
(not an init container) of that name. Clean-up uses every pod bound to the node: a directory
whose pod UID none of them has is removed once its mtime is older than the grace period, which
covers pods created after the last read of the API.

A claim share's directory (prepared by `vgpu dra-driver`) belongs to every container on the
node that uses the claim: the node's pods that name the claim (`spec.resourceClaims`, or the
claim made from a template, `status.resourceClaimStatuses`), and of each, the app containers
and sidecars whose `resources.claims` list that entry, for the whole claim or for the request
the share serves. Plain init containers are left out, as in device-plugin mode (they have
finished by the time anyone looks). Several containers of one share account in one region, so
each of them is shown the share's figures. Claim share directories are never stale here: the
driver removes them when the kubelet unprepares the claim, or when its sweeper finds the
claim gone.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from vgpu.domain.pod import Pod
from vgpu.domain.vendor import ASSIGNED_NODE_LABEL
from vgpu.ports.accounting import CacheDir, ClaimShare


@dataclass(frozen=True, slots=True)
class Owner:
    namespace: str
    pod: str
    container: str


@dataclass(frozen=True, slots=True)
class _ClaimUser:
    owner: Owner
    request: str  # "": the whole claim


class Owners:
    """The GPU pods of one node, by UID, and the containers that use each claim."""

    def __init__(self, pods: Iterable[Pod], node: str) -> None:
        pods = [pod for pod in pods if pod.uid]
        self._pods = {pod.uid: pod for pod in pods if pod.labels.get(ASSIGNED_NODE_LABEL) == node}
        self._claim_users: dict[tuple[str, str], list[_ClaimUser]] = defaultdict(list)
        for pod in pods:
            if pod.node_name == node and not pod.is_finished:
                self._add_claim_users(pod)

    @property
    def pods(self) -> list[Pod]:
        return list(self._pods.values())

    def of(self, entry: CacheDir) -> list[Owner]:
        """The containers whose figures the directory holds (none: it is no one's we know)."""
        if entry.claim is not None:
            return self._of_share(entry.claim)
        pod = self._pods.get(entry.pod_uid)
        if pod is None:
            return []
        if not any(c.name == entry.container and not c.is_init for c in pod.containers):
            return []
        return [Owner(pod.namespace, pod.name, entry.container)]

    def _of_share(self, share: ClaimShare) -> list[Owner]:
        served = share.request.partition("/")[0]
        users = self._claim_users.get((share.namespace, share.name), [])
        return [u.owner for u in users if u.request in ("", served)]

    def _add_claim_users(self, pod: Pod) -> None:
        claims = {entry.name: entry.claim for entry in pod.claims if entry.claim}
        sidecars = pod.init_progress.sidecars
        for position, container in enumerate(pod.containers):
            if container.is_init and position not in sidecars:
                continue
            for used in container.claims:
                claim = claims.get(used.name)
                if claim:
                    user = _ClaimUser(Owner(pod.namespace, pod.name, container.name), used.request)
                    self._claim_users[(pod.namespace, claim)].append(user)


def stale(
    dirs: Iterable[CacheDir], pods_on_node: Iterable[Pod], now: float, grace: float
) -> list[CacheDir]:
    """The container directories of pods that no longer exist and are older than `grace`
    seconds (claim share directories are the DRA driver's to remove, never ours)."""
    known = {pod.uid for pod in pods_on_node}
    return [
        d
        for d in dirs
        if d.claim is None and d.pod_uid not in known and d.modified < now - grace
    ]
