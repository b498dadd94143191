"""Can a pod be placed on one node, and on which cards? Every rejection says why."""

from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from vgpu.domain.device import IDLE, MIG_MODE, Device, Usage
from vgpu.domain.fragmentation.card_balanced import CardBalanced, Host
from vgpu.domain.fragmentation.cards import CardWorkload, free_milli, node_shares, pod_workload
from vgpu.domain.grant import ContainerGrant, DeviceGrant, PodGrants, held_for_life, pod_footprint
from vgpu.domain.host import NOTHING, HostResources
from vgpu.domain.mig.choice import pick_mig_slot
from vgpu.domain.mig.profiles import MigSlot
from vgpu.domain.policy import (
    FRAGMENTATION_POLICIES,
    PodPolicies,
    Policy,
    fullness_of,
    preference,
    weighted_fullness,
)
from vgpu.domain.quota import UNLIMITED, Budget
from vgpu.domain.reasons import CardRejection, NodeRejection, Reason, summarize_cards
from vgpu.domain.request import ContainerRequest
from vgpu.domain.selectors import CardSelector
from vgpu.domain.topology import PairScores, choose_cards

NO_SCORES: PairScores = MappingProxyType({})
DEFAULT_POLICIES = PodPolicies()
ANY_CARD = CardSelector()
# (rank: higher is taken first, card, memory and cores it would take, MIG instance or None,
# what the card holds already)
Candidate = tuple[float, Device, int, int, MigSlot | None, Usage]


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node's cards and what is in use on each (uuid -> usage), as the ledger sees them,
    with the NVLink/PCIe pair scores its device plugin published (`hami.io/node-nvidia-score`,
    decoded once per node change; empty when it published none), and the CPU and host memory
    it has left (None when its allocatable is unknown; only FGD and FGD-balanced read it)."""

    name: str
    devices: tuple[Device, ...]
    usage: Mapping[str, Usage]
    cordoned: frozenset[str] = frozenset()
    pair_scores: PairScores = field(default_factory=lambda: NO_SCORES)
    host: HostResources | None = None


@dataclass(frozen=True, slots=True)
class PodPlan:
    """A pod's parsed GPU needs: one request per container (init first), constraints, policies,
    and what it asks of its node's CPU and memory (`host`)."""

    key: str
    namespace: str
    containers: tuple[str, ...]
    requests: tuple[ContainerRequest | None, ...]
    init_count: int
    selector: CardSelector
    policies: PodPolicies
    vendor: str = "NVIDIA"
    host: HostResources = NOTHING


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
    took. The pod's quota charge follows the same rule. MIG instances are the exception: they
    last as long as the pod, so every container sees those the earlier ones took.
    """
    if not node.devices:
        return NodeRejection(node.name, Reason.NODE_UNREGISTERED, "node has no registered GPUs")
    grants: list[ContainerGrant] = []
    app_usage: dict[str, Usage] = {}
    init_mig: dict[str, Usage] = {}  # MIG instances of the init containers placed so far
    app_charge = Usage()
    for position, request in enumerate(plan.requests):
        is_init = position < plan.init_count
        if request is None:
            grants.append(())
            continue
        taken = init_mig if is_init else app_usage
        spent = Usage() if is_init else app_charge
        result = _fit_container(plan, request, node, taken, budget, spent)
        if isinstance(result, NodeRejection):
            name = plan.containers[position]
            return replace(result, message=f"container {name}: {result.message}")
        grants.append(result)
        if is_init:
            for grant in held_for_life(result):
                init_mig[grant.uuid] = init_mig.get(grant.uuid, IDLE) + grant.usage
                app_usage[grant.uuid] = app_usage.get(grant.uuid, IDLE) + grant.usage
        else:
            for grant in result:
                app_usage[grant.uuid] = app_usage.get(grant.uuid, IDLE) + grant.usage
                app_charge = app_charge + grant.usage
    pod_grants = tuple(grants)
    footprint = pod_footprint(pod_grants, plan.init_count)
    if plan.policies.node in FRAGMENTATION_POLICIES:
        return NodeFit(node.name, pod_grants, _fgd_fullness(plan, node, footprint))
    return NodeFit(node.name, pod_grants, _fullness_after(node, footprint))


def node_score(
    node: NodeView, policy: Policy = Policy.BINPACK, grants: PodGrants = (), init_count: int = 0
) -> float:
    """The node's score under `policy` (higher is better, 0.0 .. 3.0), as it is or once these
    grants are placed: what `decide` ranks nodes by.

    >>> card = Device("GPU-a", 0, "NVIDIA A100", count=2, memory=40000, cores=100)
    >>> node = NodeView("n", (card,), {})
    >>> grant = ((DeviceGrant("GPU-a", "NVIDIA", 20000, 50),),)
    >>> node_score(node), node_score(node, Policy.BINPACK, grant)
    (0.0, 1.5)
    >>> node_score(node, Policy.SPREAD, grant)
    1.5
    """
    return preference(policy, _fullness_after(node, pod_footprint(grants, init_count)))


def card_order(
    request: ContainerRequest,
    node: NodeView,
    policies: PodPolicies = DEFAULT_POLICIES,
    selector: CardSelector = ANY_CARD,
) -> tuple[str, ...]:
    """The cards that can take one slice of `request`, in the order the fit takes them.

    `binpack` puts the card that would be fullest first, `spread` the emptiest, both scored
    with the policies' weights; `topology-aware` puts the cards it would choose by their pair
    scores first, then the rest.

    >>> cards = tuple(Device(f"GPU-{i}", i, "NVIDIA A100", 4, 40000) for i in range(3))
    >>> node = NodeView("n", cards, {"GPU-1": Usage(1, 20000, 0)})
    >>> card_order(ContainerRequest(count=1, memory=1000), node, PodPolicies(gpu=Policy.BINPACK))
    ('GPU-1', 'GPU-0', 'GPU-2')
    """
    plan = PodPlan("", "", ("probe",), (request,), 0, selector, policies)
    candidates, _ = _candidates(plan, request, node, {})
    order = tuple(candidate[1].uuid for candidate in candidates)
    if not policies.topology or len(order) < request.count:
        return order
    chosen = choose_cards(order, request.count, node.pair_scores) or ()
    return chosen + tuple(uuid for uuid in order if uuid not in chosen)


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


def _fgd_fullness(plan: PodPlan, node: NodeView, footprint: Mapping[str, Usage]) -> float:
    """FGD's or FGD-balanced's score for placing the pod's footprint on the node, on
    `preference`'s 0..3 scale."""
    before = node_shares(node.devices, node.usage, node.cordoned)
    after = node_shares(node.devices, node.usage, node.cordoned, footprint)
    scoring = _scoring(plan, plan.policies.node)
    return 3.0 * scoring.score(node.devices, before, after, *_hosts(plan, node)) / 100


def _fgd_ranked(
    plan: PodPlan, node: NodeView, taken: Mapping[str, Usage], candidates: list[Candidate]
) -> list[Candidate]:
    """The candidates ranked by FGD's (or FGD-balanced's) score for the node once one slice
    goes on each."""
    before = node_shares(node.devices, node.usage, node.cordoned, taken)
    position = {device.uuid: i for i, device in enumerate(node.devices)}
    changes = [
        (position[device.uuid], free_milli(device, used + Usage(1, memory, cores)))
        for _, device, memory, cores, _, used in candidates
    ]
    scoring = _scoring(plan, plan.policies.gpu)
    scores = scoring.card_scores(node.devices, before, changes, *_hosts(plan, node))
    return [
        (float(score), device, memory, cores, slot, used)
        for score, (_, device, memory, cores, slot, used) in zip(scores, candidates, strict=True)
    ]


def _hosts(plan: PodPlan, node: NodeView) -> tuple[Host, Host]:
    """The node's free CPU and memory before and after the pod (None: unknown)."""
    if node.host is None:
        return None, None
    left = node.host - plan.host
    return (node.host.cpu, node.host.memory), (left.cpu, left.memory)


def fgd_host_levels(plan: PodPlan) -> Callable[[HostResources | None], tuple[int, ...]]:
    """What the pod's FGD scores read of a node's free CPU and memory (its CPU and memory
    as they are, None: not known): nodes alike card for card whose levels are equal score
    alike. FGD reads which of its shapes' CPU sizes (`CardWorkload.cpu_cuts`) the node's free
    CPU covers before and after the pod; FGD-balanced reads both exactly."""
    if plan.policies.balanced:
        return _exact_host
    cuts, asked = _workload(plan).cpu_cuts, plan.host.cpu

    def levels(host: HostResources | None) -> tuple[int, ...]:
        if host is None:
            return ()
        return bisect_right(cuts, host.cpu), bisect_right(cuts, host.cpu - asked)

    return levels


def _exact_host(host: HostResources | None) -> tuple[int, ...]:
    return () if host is None else (host.cpu, host.memory)


def _scoring(plan: PodPlan, policy: Policy) -> CardWorkload | CardBalanced:
    """What scores the pod's placements under `policy` (FGD or FGD-balanced)."""
    workload = _workload(plan)
    return workload.balanced(plan.policies.cards) if policy is Policy.FGD_BALANCED else workload


def _workload(plan: PodPlan) -> CardWorkload:
    workload = plan.policies.workload
    return workload if workload is not None else pod_workload(plan.requests, plan.selector)


def _fit_container(
    plan: PodPlan,
    request: ContainerRequest,
    node: NodeView,
    taken: Mapping[str, Usage],
    budget: Budget,
    spent: Usage,
) -> ContainerGrant | NodeRejection:
    if request.count > len(node.devices) and not is_mig_request(plan, node.devices):
        return NodeRejection(
            node.name,
            Reason.NOT_ENOUGH_CARDS,
            f"wants {request.count} cards, node has {len(node.devices)}",
        )
    candidates, rejected = _candidates(plan, request, node, taken)
    chosen = _choose(candidates, request, budget, spent, plan, node.pair_scores)
    if isinstance(chosen, tuple):
        return chosen
    rejected.extend(chosen.refused)
    over_quota = {r.uuid for r in chosen.refused if r.reason is Reason.QUOTA}
    message = _shortage(node, request, len(candidates) - len(over_quota), rejected, chosen.held)
    if over_quota:
        message = replace(message, message=f"{message.message}; {budget.describe()}")
    return message


def _candidates(
    plan: PodPlan, request: ContainerRequest, node: NodeView, taken: Mapping[str, Usage]
) -> tuple[list[Candidate], list[CardRejection]]:
    """The cards that pass every per-card rule, best first under the GPU policy, and the
    rejections of the others."""
    rejected: list[CardRejection] = []
    candidates: list[Candidate] = []
    binpack = plan.policies.gpu is Policy.BINPACK
    weights = plan.policies.weights
    picky = plan.selector.picks_cards
    mig_pod = plan.selector.takes_mig
    for device in node.devices:
        used = node.usage.get(device.uuid, IDLE)
        if taken and device.uuid in taken:
            used = used + taken[device.uuid]
        memory = request.memory_on(device)
        cores = request.cores
        refusal = _refuse(plan, request, memory, device, used, node.cordoned, picky)
        if refusal is not None:
            rejected.append(refusal)
            continue
        slot = None
        if mig_pod and device.mode == MIG_MODE:  # the instance charges its profile's share
            chosen = pick_mig_slot(device, memory, used.mig)
            if chosen is None:
                rejected.append(CardRejection(device.uuid, Reason.MIG_TOPOLOGY, memory))
                continue
            profile, slot = chosen
            memory, cores = profile.memory_mib, profile.core
        full = weighted_fullness(
            weights,
            used.slices + 1,
            device.count,
            used.cores + cores,
            device.cores,
            used.memory + memory,
            device.memory,
        )
        candidates.append((full if binpack else -full, device, memory, cores, slot, used))
    if plan.policies.gpu in FRAGMENTATION_POLICIES and candidates:
        candidates = _fgd_ranked(plan, node, taken, candidates)
    candidates.sort(key=lambda c: (-c[0], c[1].index, c[1].uuid))
    return candidates, rejected


@dataclass(frozen=True, slots=True)
class _Shortfall:
    """Why `_choose` found too few: the cards it refused on the way (over quota, or a MIG card
    with no placement left for the container's next device), and how many devices it held
    when it ran out (in the last NUMA group tried)."""

    refused: list[CardRejection]
    held: int


def _choose(
    candidates: Sequence[Candidate],
    request: ContainerRequest,
    budget: Budget,
    spent: Usage,
    plan: PodPlan,
    scores: PairScores,
) -> ContainerGrant | _Shortfall:
    """Take the best `request.count` cards within quota (on one NUMA node when asked);
    under `topology-aware`, the group's cards with the best links
    (docs/protocol.md#topology-aware-choice).

    A card in MIG mode may give one container several instances: as in HAMi's Fit, it is
    tried again for the container's next device, with the instances just taken counted, before
    the next card is (under `topology-aware` only when the group has too few cards to give
    each device its own; MIG instances have no NVLink peer access to weigh anyway).
    """
    numa_bound = plan.selector.numa_bind or plan.policies.numa
    groups: dict[int, list[Candidate]] = {}
    for candidate in candidates:
        groups.setdefault(candidate[1].numa if numa_bound else 0, []).append(candidate)
    refused: list[CardRejection] = []
    held_last = 0
    for group in groups.values():
        fill = plan.selector.takes_mig
        if plan.policies.topology and (len(group) >= request.count or not fill):
            group, fill = _linked_best(group, request.count, scores), False
        picked: list[DeviceGrant] = []
        charge = spent
        for _, device, memory, cores, slot, held in group:
            grant = DeviceGrant(device.uuid, plan.vendor, memory, cores, slot)
            while True:
                if budget is not UNLIMITED and not budget.allows(charge + grant.usage):
                    refused.append(CardRejection(device.uuid, Reason.QUOTA))
                    break
                picked.append(grant)
                charge = charge + grant.usage
                if len(picked) == request.count:
                    return tuple(picked)
                if not fill or slot is None:
                    break
                held = held + grant.usage
                another = _another_instance(plan, request, device, held)
                if isinstance(another, CardRejection):
                    refused.append(another)
                    break
                grant = another
        held_last = len(picked)
    return _Shortfall(refused, held_last)


def is_mig_request(plan: PodPlan, devices: Iterable[Device]) -> bool:
    """Whether a container of the pod may take several instances of one card among `devices`,
    so that it may ask for more devices than there are cards (HAMi's isMIGRequest). Only a pod
    that names `mig` in `nvidia.com/vgpu-mode` is, as only such a pod gets MIG cards; HAMi
    also counts a pod that names no mode.

    >>> plan = PodPlan("ns/p", "ns", ("c",), (ContainerRequest(2),), 0,
    ...                CardSelector(modes=("mig",)), PodPolicies())
    >>> card = Device("GPU-a", 0, "A100", 7, 40960, mode="mig")
    >>> is_mig_request(plan, [card]), is_mig_request(replace(plan, selector=ANY_CARD), [card])
    (True, False)
    """
    return plan.selector.takes_mig and any(d.mode == MIG_MODE for d in devices)


def _another_instance(
    plan: PodPlan, request: ContainerRequest, device: Device, held: Usage
) -> DeviceGrant | CardRejection:
    """One more instance of `request` on the MIG card `device`, which now holds `held` (the
    container's instances so far included), or why there is none: no profile has a free
    placement (CardMigTopologyInfeasible, as HAMi's second look at the card says), or the
    split count is spent. Like HAMi, which re-checks only the placement here, the card's other
    rules are not judged again: they passed for this container a moment ago."""
    memory = request.memory_on(device)
    chosen = pick_mig_slot(device, memory, held.mig)
    if chosen is None:
        return CardRejection(device.uuid, Reason.MIG_TOPOLOGY, memory)
    if held.slices >= device.count:
        return CardRejection(device.uuid, Reason.SLICES_EXHAUSTED)
    profile, slot = chosen
    return DeviceGrant(device.uuid, plan.vendor, profile.memory_mib, profile.core, slot)


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
    elif not selector.mode_ok(device):  # every pod: a MIG card only takes MIG pods
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


def _linked_best(group: list[Candidate], count: int, scores: PairScores) -> list[Candidate]:
    """The `count` cards of `group` that `topology.choose_cards` picks, in the group's order;
    the whole group when it has too few (they are all the fit can hold)."""
    chosen = choose_cards([candidate[1].uuid for candidate in group], count, scores)
    if chosen is None:
        return group
    picked = set(chosen)
    return [candidate for candidate in group if candidate[1].uuid in picked]


def _shortage(
    node: NodeView,
    request: ContainerRequest,
    usable: int,
    rejected: list[CardRejection],
    held: int,
) -> NodeRejection:
    wanted = f"wants {request.count} x ({request.describe_memory()}, {request.cores}% cores)"
    considered = len(node.devices)
    if usable >= request.count:  # enough cards fit, but not on one NUMA node
        return NodeRejection(
            node.name,
            Reason.NUMA,
            f"{wanted}: {usable} cards fit but no NUMA node has {request.count}",
            tuple(rejected),
            considered,
            held,
        )
    reason = _commonest(rejected) if rejected else Reason.TOO_FEW_LEFT
    fits = f"{usable} of {considered} cards fit; " if usable else ""
    return NodeRejection(
        node.name,
        reason,
        f"{wanted}: {fits}" + summarize_cards(rejected),
        tuple(rejected),
        considered,
        held,
    )


def _commonest(rejected: list[CardRejection]) -> Reason:
    counts: dict[Reason, int] = {}
    for r in rejected:
        counts[r.reason] = counts.get(r.reason, 0) + 1
    return max(sorted(counts), key=lambda r: counts[r])
