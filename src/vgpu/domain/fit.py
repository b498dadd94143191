"""Can a pod be placed on one node, and on which cards? Every rejection says why."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from vgpu.domain.device import Device, Usage
from vgpu.domain.grant import ContainerGrant, DeviceGrant, PodGrants, pod_footprint
from vgpu.domain.policy import PodPolicies, card_fullness, fullness, preference
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
    footprint = pod_footprint(pod_grants, plan.init_count)
    after = (node.usage.get(d.uuid, IDLE) + footprint.get(d.uuid, IDLE) for d in node.devices)
    return NodeFit(node.name, pod_grants, fullness(node.devices, after))


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
    candidates: list[tuple[float, Device, DeviceGrant]] = []
    for device in node.devices:
        used = node.usage.get(device.uuid, IDLE) + taken.get(device.uuid, IDLE)
        refusal = _refuse(plan, request, device, used, node.cordoned)
        if refusal is not None:
            rejected.append(refusal)
            continue
        grant = DeviceGrant(device.uuid, plan.vendor, request.memory_on(device), request.cores)
        rank = preference(plan.policies.gpu, card_fullness(device, used + grant.usage))
        candidates.append((rank, device, grant))
    candidates.sort(key=lambda c: (-c[0], c[1].index, c[1].uuid))
    chosen, over_quota = _choose(candidates, request.count, budget, spent, plan)
    if chosen is not None:
        return chosen
    rejected.extend(over_quota)
    message = _shortage(node.name, request, len(candidates) - len(over_quota), rejected)
    if over_quota:
        message = replace(message, message=f"{message.message}; {budget.describe()}")
    return message


def _choose(
    candidates: Sequence[tuple[float, Device, DeviceGrant]],
    count: int,
    budget: Budget,
    spent: Usage,
    plan: PodPlan,
) -> tuple[ContainerGrant | None, list[CardRejection]]:
    """Take the best `count` cards within quota (on one NUMA node when asked)."""
    numa_bound = plan.selector.numa_bind or plan.policies.numa
    groups: dict[int, list[tuple[float, Device, DeviceGrant]]] = {}
    for candidate in candidates:
        groups.setdefault(candidate[1].numa if numa_bound else 0, []).append(candidate)
    over_quota: list[CardRejection] = []
    for group in groups.values():
        picked: list[DeviceGrant] = []
        charge = spent
        for _, device, grant in group:
            if not budget.allows(charge + grant.usage):
                over_quota.append(CardRejection(device.uuid, Reason.QUOTA))
                continue
            picked.append(grant)
            charge = charge + grant.usage
            if len(picked) == count:
                return tuple(picked), []
    return None, over_quota


def _refuse(
    plan: PodPlan, request: ContainerRequest, device: Device, used: Usage, cordoned: frozenset[str]
) -> CardRejection | None:
    selector = plan.selector

    def no(reason: Reason, need: int = 0, free: int = 0) -> CardRejection:
        return CardRejection(device.uuid, reason, need, free)

    if not device.healthy:
        return no(Reason.UNHEALTHY)
    if device.uuid in cordoned:
        return no(Reason.CORDONED)
    if not selector.mode_ok(device):
        return no(Reason.MODE)
    if not selector.type_ok(device):
        return no(Reason.TYPE_MISMATCH)
    if not selector.uuid_ok(device):
        return no(Reason.UUID_MISMATCH)
    if plan.policies.idle_only and not used.is_idle:
        return no(Reason.EXCLUSIVE)
    if used.slices >= device.count:
        return no(Reason.SLICES_EXHAUSTED)
    memory = request.memory_on(device)
    if device.memory - used.memory < memory:
        return no(Reason.INSUFFICIENT_MEMORY, memory, max(device.memory - used.memory, 0))
    if device.cores - used.cores < request.cores:
        return no(Reason.INSUFFICIENT_CORES, request.cores, max(device.cores - used.cores, 0))
    if request.cores >= 100 and used.slices > 0:
        return no(Reason.EXCLUSIVE)
    if request.cores == 0 and device.cores > 0 and used.cores >= device.cores:
        return no(Reason.CORES_EXHAUSTED)
    return None


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
