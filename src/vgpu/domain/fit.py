"""Can a pod be placed on one node, and on which cards? Every rejection says why."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from vgpu.domain.device import Device, Usage
from vgpu.domain.grant import ContainerGrant, DeviceGrant, PodGrants, pod_footprint
from vgpu.domain.policy import PodPolicies, Policy, fullness_of
from vgpu.domain.quota import UNLIMITED, Budget
from vgpu.domain.reasons import CardRejection, NodeRejection, Reason, summarize_cards
from vgpu.domain.request import ContainerRequest
from vgpu.domain.selectors import CardSelector

IDLE = Usage()


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node's cards and what is in use on each (uuid -> usage), as the ledger sees them."""

    name: str
    devices: tuple[Device, ...]
    usage: Mapping[str, Usage]
    cordoned: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class PodPlan:
    """A pod's parsed GPU needs: one request per container (init first), constraints, policies."""

    key: str
    namespace: str
    containers: tuple[str, ...]
    requests: tuple[ContainerRequest | None, ...]
    init_count: int
    selector: CardSelector
    policies: PodPolicies
    vendor: str = "NVIDIA"


@dataclass(frozen=True, slots=True)
class NodeFit:
    """The pod fits this node with these grants; `fullness` is the node's after placement."""

    node: str
    grants: PodGrants
    fullness: float


def fit_pod(plan: PodPlan, node: NodeView, budget: Budget = UNLIMITED) -> NodeFit | NodeRejection:
    """Place every container of the pod on `node`.

    Init containers run alone before the app containers, so each is placed against the node as
    it is; app containers are placed one after another, each seeing the cards the previous ones
    took. The pod's quota charge follows the same rule.
    """
    if not node.devices:
        return NodeRejection(node.name, Reason.NODE_UNREGISTERED, "node has no registered GPUs")
    grants: list[ContainerGrant] = []
    app_usage: dict[str, Usage] = {}
    app_charge = Usage()
    for position, request in enumerate(plan.requests):
        is_init = position < plan.init_count
        if request is None:
            grants.append(())
            continue
        taken = {} if is_init else app_usage
        spent = Usage() if is_init else app_charge
        result = _fit_container(plan, request, node, taken, budget, spent)
        if isinstance(result, NodeRejection):
            name = plan.containers[position]
            return NodeRejection(
                node.name, result.reason, f"container {name}: {result.message}", result.cards
            )
        grants.append(result)
        if not is_init:
            for grant in result:
                app_usage[grant.uuid] = app_usage.get(grant.uuid, IDLE) + grant.usage
                app_charge = app_charge + grant.usage
    pod_grants = tuple(grants)
    return NodeFit(
        node.name, pod_grants, _fullness_after(node, pod_footprint(pod_grants, plan.init_count))
    )


def _fullness_after(node: NodeView, footprint: Mapping[str, Usage]) -> float:
    """The node's fullness once the pod's footprint is added (plain sums: a hot path)."""
    count = cores = memory = slices = used_cores = used_memory = 0
    for device in node.devices:
        count += device.count
        cores += device.cores
        memory += device.memory
        for usage in (node.usage.get(device.uuid), footprint.get(device.uuid)):
            if usage is not None:
                slices += usage.slices
                used_cores += usage.cores
                used_memory += usage.memory
    return fullness_of(slices, count, used_cores, cores, used_memory, memory)


def _fit_container(
    plan: PodPlan,
    request: ContainerRequest,
    node: NodeView,
    taken: Mapping[str, Usage],
    budget: Budget,
    spent: Usage,
) -> ContainerGrant | NodeRejection:
    if request.count > len(node.devices):
        return NodeRejection(
            node.name,
            Reason.NOT_ENOUGH_CARDS,
            f"wants {request.count} cards, node has {len(node.devices)}",
        )
    rejected: list[CardRejection] = []
    candidates: list[tuple[float, Device, int]] = []  # (rank, card, memory it would take)
    binpack = plan.policies.gpu is Policy.BINPACK
    picky = plan.selector.picks_cards
    cores = request.cores
    for device in node.devices:
        used = node.usage.get(device.uuid, IDLE)
        if taken and device.uuid in taken:
            used = used + taken[device.uuid]
        memory = request.memory_on(device)
        refusal = _refuse(plan, request, memory, device, used, node.cordoned, picky)
        if refusal is not None:
            rejected.append(refusal)
            continue
        full = fullness_of(
            used.slices + 1,
            device.count,
            used.cores + cores,
            device.cores,
            used.memory + memory,
            device.memory,
        )
        candidates.append((full if binpack else -full, device, memory))
    candidates.sort(key=lambda c: (-c[0], c[1].index, c[1].uuid))
    chosen, over_quota = _choose(candidates, request, budget, spent, plan)
    if chosen is not None:
        return chosen
    rejected.extend(over_quota)
    message = _shortage(node.name, request, len(candidates) - len(over_quota), rejected)
    if over_quota:
        message = replace(message, message=f"{message.message}; {budget.describe()}")
    return message


def _choose(
    candidates: Sequence[tuple[float, Device, int]],
    request: ContainerRequest,
    budget: Budget,
    spent: Usage,
    plan: PodPlan,
) -> tuple[ContainerGrant | None, list[CardRejection]]:
    """Take the best `request.count` cards within quota (on one NUMA node when asked)."""
    numa_bound = plan.selector.numa_bind or plan.policies.numa
    groups: dict[int, list[tuple[float, Device, int]]] = {}
    for candidate in candidates:
        groups.setdefault(candidate[1].numa if numa_bound else 0, []).append(candidate)
    over_quota: list[CardRejection] = []
    for group in groups.values():
        picked: list[DeviceGrant] = []
        charge = spent
        for _, device, memory in group:
            grant = DeviceGrant(device.uuid, plan.vendor, memory, request.cores)
            if budget is not UNLIMITED and not budget.allows(charge + grant.usage):
                over_quota.append(CardRejection(device.uuid, Reason.QUOTA))
                continue
            picked.append(grant)
            charge = charge + grant.usage
            if len(picked) == request.count:
                return tuple(picked), []
    return None, over_quota


def _refuse(
    plan: PodPlan,
    request: ContainerRequest,
    memory: int,
    device: Device,
    used: Usage,
    cordoned: frozenset[str],
    picky: bool,
) -> CardRejection | None:
    """The first rule `device` breaks for this request, or None when it can take it."""
    selector = plan.selector
    reason: Reason | None = None
    need = free = 0
    if not device.healthy:
        reason = Reason.UNHEALTHY
    elif device.uuid in cordoned:
        reason = Reason.CORDONED
    elif not selector.mode_ok(device):  # every pod: a MIG card never takes a slice
        reason = Reason.MODE
    elif picky and not selector.type_ok(device):
        reason = Reason.TYPE_MISMATCH
    elif picky and not selector.uuid_ok(device):
        reason = Reason.UUID_MISMATCH
    elif plan.policies.idle_only and not used.is_idle:
        reason = Reason.EXCLUSIVE
    elif used.slices >= device.count:
        reason = Reason.SLICES_EXHAUSTED
    elif device.memory - used.memory < memory:
        reason, need, free = Reason.INSUFFICIENT_MEMORY, memory, device.memory - used.memory
    elif device.cores - used.cores < request.cores:
        reason, need, free = Reason.INSUFFICIENT_CORES, request.cores, device.cores - used.cores
    elif request.cores >= 100 and used.slices > 0:
        reason = Reason.EXCLUSIVE
    elif request.cores == 0 and device.cores > 0 and used.cores >= device.cores:
        reason = Reason.CORES_EXHAUSTED
    if reason is None:
        return None
    return CardRejection(device.uuid, reason, need, max(free, 0))


def _shortage(
    node: str, request: ContainerRequest, usable: int, rejected: list[CardRejection]
) -> NodeRejection:
    wanted = f"wants {request.count} x ({request.describe_memory()}, {request.cores}% cores)"
    if usable >= request.count:  # enough cards fit, but not on one NUMA node
        return NodeRejection(
            node,
            Reason.NUMA,
            f"{wanted}: {usable} cards fit but no NUMA node has {request.count}",
            tuple(rejected),
        )
    reason = _commonest(rejected) if rejected else Reason.NOT_ENOUGH_CARDS
    fits = f"{usable} of {usable + len(rejected)} cards fit; " if usable else ""
    return NodeRejection(
        node, reason, f"{wanted}: {fits}" + summarize_cards(rejected), tuple(rejected)
    )


def _commonest(rejected: list[CardRejection]) -> Reason:
    counts: dict[Reason, int] = {}
    for r in rejected:
        counts[r.reason] = counts.get(r.reason, 0) + 1
    return max(sorted(counts), key=lambda r: counts[r])
