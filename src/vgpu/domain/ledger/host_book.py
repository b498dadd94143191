"""Each node's allocatable CPU and host memory, and the requests of the pods on it.

Every pod bound to a node counts, whichever scheduler placed it and whether it asks for a GPU or
not (kube-scheduler counts them alike); so does a pod this scheduler has reserved cards for and
that is not bound yet. A bound pod's charge outranks a reservation's: releasing a reservation
leaves it.
"""

from dataclasses import dataclass

from vgpu.domain.host import NOTHING, HostResources


@dataclass(frozen=True, slots=True)
class HostCharge:
    node: str
    request: HostResources
    bound: bool


class HostBook:
    def __init__(self) -> None:
        self._capacity: dict[str, HostResources] = {}
        self._used: dict[str, HostResources] = {}
        self._charges: dict[str, HostCharge] = {}

    def set_capacity(self, node: str, capacity: HostResources | None) -> bool:
        """The node's allocatable CPU and memory (None: unknown); True when it changed."""
        if self._capacity.get(node) == capacity:
            return False
        if capacity is None:
            del self._capacity[node]
        else:
            self._capacity[node] = capacity
        return True

    def charge(self, pod: str, node: str, request: HostResources, bound: bool) -> list[str]:
        """Count the pod's request on `node` (replacing any earlier charge of the pod; a pod
        that asks for nothing is not kept); the nodes whose free resources changed."""
        if request == NOTHING:  # changes no node: not kept (a cluster has many such pods)
            return self.release(pod)
        charge = HostCharge(node, request, bound)
        previous = self._charges.get(pod)
        if previous == charge:
            return []
        changed = [] if previous is None else self._take_off(previous)
        self._charges[pod] = charge
        self._used[node] = self._used.get(node, NOTHING) + request
        return changed if node in changed else [*changed, node]

    def release(self, pod: str, *, unbound_only: bool = False) -> list[str]:
        """Stop counting the pod (with `unbound_only`, only a reservation's charge); the nodes
        whose free resources changed."""
        previous = self._charges.get(pod)
        if previous is None or (unbound_only and previous.bound):
            return []
        del self._charges[pod]
        return self._take_off(previous)

    def free(self, node: str, exclude_pod: str | None = None) -> HostResources | None:
        """What the node has left (None when its capacity is unknown); `exclude_pod`'s own
        charge on it counts as free."""
        capacity = self._capacity.get(node)
        if capacity is None:
            return None
        left = capacity - self._used.get(node, NOTHING)
        own = self._charges.get(exclude_pod) if exclude_pod is not None else None
        if own is not None and own.node == node:
            left = left + own.request
        return left

    def charged(self, pod: str) -> HostCharge | None:
        return self._charges.get(pod)

    def _take_off(self, charge: HostCharge) -> list[str]:
        left = self._used[charge.node] - charge.request
        if left == NOTHING:
            del self._used[charge.node]
        else:
            self._used[charge.node] = left
        return [charge.node]
