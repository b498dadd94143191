"""Why a pod's ResourceClaims can or cannot be allocated, node by node, and the smallest
change that would place them: kube-scheduler's allocator asked on every node, its answer
worded for people.

Per node one sentence: it fits, the allocator's error, or the device that came closest and
what it lacks (`gpu-1: memory: needs 60Gi, 40Gi free of 80Gi`); nodes grouped by reason. When
the claims fit nowhere, what would make them fit: a smaller amount of a capacity (the largest
that fits, found by bisection, as the scheduler rounds it), fewer devices, a selector dropped,
or named claims deallocated.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from vgpu.domain.dra.allocated import AllocatedDevices
from vgpu.domain.dra.allocator import Allocator
from vgpu.domain.dra.capacity import qualified
from vgpu.domain.dra.model import (
    AllocationMode,
    DeviceRequest,
    DeviceSubRequest,
    ExactDeviceRequest,
    ResourceClaim,
)
from vgpu.domain.dra.outcome import (
    Allocation,
    AllocationOutcome,
    CannotAllocate,
    DeviceProblem,
    amount_text,
)

EXAMPLES = 5  # node names shown per group
WAIT_SEARCH_LIMIT = 64  # allocation attempts per node when looking for claims to wait for
_ERROR = "error"
_TOO_FEW = "too few devices"
_CAPACITY_REASONS = frozenset(
    {DeviceProblem.INSUFFICIENT.value, DeviceProblem.POLICY.value, _TOO_FEW}
)
_FAR = 2**63  # a verdict without a measurable shortfall sorts after every measured one


@dataclass(frozen=True, slots=True)
class ClaimNodeVerdict:
    """One node's answer: fits, or the reason (a DeviceProblem's value, `error`, `no
    devices`, `too few devices`) and a sentence; `short` orders how close a node came."""

    node: str
    fits: bool
    reason: str
    sentence: str
    short: int = _FAR
    capacity: str = ""  # the capacity the closest device lacks (qualified name), if any


@dataclass(frozen=True, slots=True)
class ClaimSuggestion:
    """One change that would place the claims: what (`capacity`, `count`, `selector`,
    `wait`), in words, and where they would then go."""

    change: str
    text: str
    node: str
    value: Any = None


@dataclass(frozen=True, slots=True)
class ClaimsExplanation:
    """The answer for one pod's claims."""

    pod: str
    claims: tuple[str, ...]
    summary: str
    allocation: Allocation | None
    verdicts: tuple[ClaimNodeVerdict, ...]
    suggestions: tuple[ClaimSuggestion, ...] = field(default=())
    notes: tuple[str, ...] = ()
    allocated: bool = False  # every claim was allocated already

    @property
    def fits(self) -> bool:
        """Whether the pod's claims are allocated already or could be now."""
        return self.allocation is not None or self.allocated

    def groups(self) -> list[tuple[str, list[ClaimNodeVerdict]]]:
        """Verdicts by reason: those that fit first, then the largest groups."""
        by_reason: dict[str, list[ClaimNodeVerdict]] = {}
        for verdict in self.verdicts:
            by_reason.setdefault(verdict.reason, []).append(verdict)
        return sorted(by_reason.items(), key=lambda kv: (kv[0] != "", -len(kv[1]), kv[0]))

    def lines(self) -> list[str]:
        """The human report."""
        out = [f"pod {self.pod}: {self.summary}"]
        out.extend(f"  {note}" for note in self.notes)
        if self.allocation is not None:
            for claim, result in zip(self.claims, self.allocation.results, strict=True):
                devices = "; ".join(
                    f"{r.pool}/{r.device}" + _consumed(r.consumed_capacity) for r in result.results
                )
                out.append(f"  would get on {self.allocation.node}: {claim}: {devices}")
        for reason, members in self.groups():
            names = ", ".join(v.node for v in members[:EXAMPLES])
            more = f" and {len(members) - EXAMPLES} more" if len(members) > EXAMPLES else ""
            noun = "node" if len(members) == 1 else "nodes"
            out.append(f"  {len(members)} {noun}, {reason or 'can take them'}: {names}{more}")
            if reason:
                closest = min(members, key=lambda v: (v.short, v.node))
                out.append(f"    closest: {closest.node}: {closest.sentence}")
        if self.suggestions:
            out.append("  they would fit with one of these changes:")
            out.extend(f"    - {s.text}" for s in self.suggestions)
        elif self.allocation is None and self.verdicts:
            out.append("  no single change found that would place them")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The explanation as JSON-ready values (`vgpu explain --json`)."""
        allocation = None
        if self.allocation is not None:
            allocation = {
                "node": self.allocation.node,
                "claims": [
                    {
                        "claim": claim,
                        "devices": [
                            {
                                "request": r.request,
                                "driver": r.driver,
                                "pool": r.pool,
                                "device": r.device,
                                "consumedCapacity": dict(r.consumed_capacity),
                            }
                            for r in result.results
                        ],
                    }
                    for claim, result in zip(self.claims, self.allocation.results, strict=True)
                ],
            }
        return {
            "pod": self.pod,
            "claims": list(self.claims),
            "fits": self.fits,
            "summary": self.summary,
            "notes": list(self.notes),
            "placement": allocation,
            "nodes": [
                {"node": v.node, "fits": v.fits, "reason": v.reason, "sentence": v.sentence}
                for v in self.verdicts
            ],
            "suggestions": [
                {"change": s.change, "value": s.value, "node": s.node, "text": s.text}
                for s in self.suggestions
            ],
        }


def explain_claims(
    pod: str,
    claims: Sequence[ResourceClaim],
    allocator: Allocator,
    allocated: Sequence[ResourceClaim],
    nodes: Sequence[str] | None = None,
    *,
    suggest: bool = True,
    notes: Sequence[str] = (),
) -> ClaimsExplanation:
    """Why `claims` (the pod's, not yet allocated) can or cannot be allocated on each of
    `nodes` (default: every node slices are published for), with `allocated` claims holding
    what they hold."""
    names = sorted(set(nodes if nodes is not None else allocator.nodes()))
    keys = tuple(c.key for c in claims)
    holding = AllocatedDevices(c for c in allocated if c.key not in keys)
    verdicts = []
    first: Allocation | None = None
    for node in names:
        outcome = allocator.allocate(claims, node, holding)
        if isinstance(outcome, Allocation):
            first = first or outcome
            verdicts.append(ClaimNodeVerdict(node, True, "", "fits"))
        else:
            verdicts.append(_verdict(outcome, allocator))
    fitting = sum(v.fits for v in verdicts)
    summary = f"its claims fit on {fitting}/{len(verdicts)} nodes"
    if first is not None:
        summary += f", {first.node} among them"
    else:
        counts = Counter(v.reason for v in verdicts)
        if counts:
            summary += ": " + ", ".join(f"{n} {reason}" for reason, n in counts.most_common())
    suggestions: tuple[ClaimSuggestion, ...] = ()
    if first is None and suggest and names:
        search = _Search(claims, allocator, allocated, names)
        suggestions = search.suggestions(verdicts)
    return ClaimsExplanation(pod, keys, summary, first, tuple(verdicts), suggestions, tuple(notes))


def _verdict(outcome: CannotAllocate, allocator: Allocator) -> ClaimNodeVerdict:
    node = outcome.node
    if outcome.problem:
        return ClaimNodeVerdict(node, False, _ERROR, outcome.problem)
    refused = [v for v in outcome.verdicts if v.problem is not None]
    if not outcome.verdicts:
        return ClaimNodeVerdict(node, False, "no devices", f"{node} publishes no usable devices")
    if not refused:  # each could serve its request alone: too few, or constraints
        return ClaimNodeVerdict(node, False, _TOO_FEW, outcome.message)
    counts = Counter(v.problem for v in refused)
    problem = max(sorted(counts, key=str), key=counts.__getitem__)
    closest = min(
        (v for v in refused if v.problem is problem),
        key=lambda v: (v.short if v.short else _FAR, str(v.device)),
    )
    able = len(outcome.verdicts) - len(refused)
    extra = f" ({able} of its devices could serve a request; {outcome.message})" if able else ""
    assert problem is not None
    sentence = f"{closest.device.device}: {closest.sentence}{extra}"
    short = closest.short if closest.short else _FAR
    return ClaimNodeVerdict(node, False, problem.value, sentence, short, closest.capacity)


def _consumed(consumed: Mapping[str, int]) -> str:
    if not consumed:
        return ""
    return " (" + ", ".join(f"{k} {amount_text(k, v)}" for k, v in sorted(consumed.items())) + ")"


class _Search:
    """Looks for one change that places the claims somewhere."""

    def __init__(
        self,
        claims: Sequence[ResourceClaim],
        allocator: Allocator,
        allocated: Sequence[ResourceClaim],
        nodes: Sequence[str],
    ) -> None:
        self._claims = list(claims)
        self._allocator = allocator
        self._allocated = list(allocated)
        self._keys = {c.key for c in claims}
        self._holding = AllocatedDevices(c for c in allocated if c.key not in self._keys)
        self._nodes = nodes
        self._short: list[str] = []

    def suggestions(self, verdicts: Sequence[ClaimNodeVerdict]) -> tuple[ClaimSuggestion, ...]:
        # less of a capacity can only help where a capacity, or the devices' number, fell short
        self._short = [v.node for v in verdicts if v.reason in _CAPACITY_REASONS]
        found: list[ClaimSuggestion | None] = []
        for c, claim in enumerate(self._claims):
            for r, request in enumerate(claim.requests):
                for sub, wanted in _alternatives(request):
                    for name in _capacities(wanted, verdicts):
                        found.append(self._less(c, r, sub, name))
                    found.append(self._fewer(c, r, sub))
                    found.extend(self._without_selectors(c, r, sub))
        found.append(self._wait())
        unique: dict[str, ClaimSuggestion] = {}
        for suggestion in found:
            if suggestion is not None:
                unique.setdefault(suggestion.text, suggestion)
        return tuple(unique.values())

    def _placed(
        self,
        claims: Sequence[ResourceClaim],
        holding: AllocatedDevices,
        nodes: Sequence[str] | None = None,
    ) -> str | None:
        for node in self._nodes if nodes is None else nodes:
            outcome: AllocationOutcome = self._allocator.allocate(claims, node, holding, False)
            if isinstance(outcome, Allocation):
                return node
        return None

    def _changed(self, c: int, r: int, sub: int, **fields: Any) -> list[ResourceClaim]:
        """The claims with these fields of one request (or subrequest) replaced."""
        claims = list(self._claims)
        claim = claims[c]
        requests = list(claim.requests)
        request = requests[r]
        if request.exactly is not None:
            requests[r] = replace(request, exactly=replace(request.exactly, **fields))
        else:
            subs = list(request.first_available)
            subs[sub] = replace(subs[sub], **fields)
            requests[r] = replace(request, first_available=tuple(subs))
        claims[c] = replace(claim, requests=tuple(requests))
        return claims

    def _less(self, c: int, r: int, sub: int, name: str) -> ClaimSuggestion | None:
        """The largest amount of capacity `name` at which the claims fit (bisection: fitting
        only gets easier as the amount shrinks)."""
        wanted = _wanted(self._claims[c].requests[r], sub)
        asked = wanted.capacity.get(name)
        if asked is None:
            asked = self._largest(name)
            if asked is None:
                return None

        def with_amount(amount: int) -> list[ResourceClaim]:
            return self._changed(c, r, sub, capacity={**wanted.capacity, name: amount})

        nodes = self._short
        low, high = 0, asked - 1
        if high < low or self._placed(with_amount(low), self._holding, nodes) is None:
            return None
        while low < high:
            middle = (low + high + 1) // 2
            if self._placed(with_amount(middle), self._holding, nodes) is not None:
                low = middle
            else:
                high = middle - 1
        node = self._placed(with_amount(low), self._holding, nodes)
        assert node is not None
        label = _label(self._claims[c], self._claims[c].requests[r], sub)
        shown, now = amount_text(name, low), amount_text(name, asked)
        text = f"ask for at most {shown} of {name} in {label} (now {now}): it fits on {node}"
        return ClaimSuggestion("capacity", text, node, {"capacity": name, "amount": low})

    def _largest(self, name: str) -> int | None:
        """The largest value of capacity `name` on any device: what a request that does not
        name it may consume (a default of the whole device)."""
        values = [
            cap.value
            for node in self._nodes
            for candidate in self._allocator.candidates(node)
            for key, cap in candidate.capacities.items()
            if key == qualified(name, candidate.id.driver)
        ]
        return max(values, default=None)

    def _fewer(self, c: int, r: int, sub: int) -> ClaimSuggestion | None:
        wanted = _wanted(self._claims[c].requests[r], sub)
        if wanted.allocation_mode is not AllocationMode.EXACT_COUNT or wanted.count <= 1:
            return None
        for count in range(wanted.count - 1, 0, -1):
            node = self._placed(self._changed(c, r, sub, count=count), self._holding)
            if node is not None:
                label = _label(self._claims[c], self._claims[c].requests[r], sub)
                text = f"ask for {count} devices in {label} (now {wanted.count}): it fits on {node}"
                return ClaimSuggestion("count", text, node, count)
        return None

    def _without_selectors(self, c: int, r: int, sub: int) -> list[ClaimSuggestion]:
        wanted = _wanted(self._claims[c].requests[r], sub)
        found = []
        for i, expression in enumerate(wanted.selectors):
            kept = wanted.selectors[:i] + wanted.selectors[i + 1 :]
            node = self._placed(
                self._changed(c, r, sub, selectors=kept),
                self._holding,
            )
            if node is not None:
                label = _label(self._claims[c], self._claims[c].requests[r], sub)
                text = f"drop selector #{i} of {label} ({expression}): it fits on {node}"
                found.append(ClaimSuggestion("selector", text, node, expression))
        return found

    def _wait(self) -> ClaimSuggestion | None:
        """Few allocated claims whose deallocation lets the claims fit on one node: on each
        node, its holders are let go one at a time (by name) until they fit, then each is
        kept back again if they still fit without it; the node needing fewest wins."""
        best: tuple[list[str], str] | None = None
        others = [c for c in self._allocated if c.key not in self._keys]
        for node in self._nodes:
            holders = sorted(
                {h for d in self._allocator.candidates(node) for h in self._holding.holders(d.id)}
            )
            if not holders or (best is not None and len(best[0]) == 1):
                continue
            released: list[str] = []
            for holder in holders[:WAIT_SEARCH_LIMIT]:
                released.append(holder)
                if self._fits_without(node, others, released):
                    break
            if not self._fits_without(node, others, released):
                continue
            for holder in list(released):
                trial = [h for h in released if h != holder]
                if self._fits_without(node, others, trial):
                    released = trial
            if best is None or len(released) < len(best[0]):
                best = (released, node)
        if best is None:
            return None
        names, node = best
        text = f"wait for {', '.join(names)} to be deallocated: they then fit on {node}"
        return ClaimSuggestion("wait", text, node, names)

    def _fits_without(self, node: str, others: list[ResourceClaim], gone: list[str]) -> bool:
        holding = AllocatedDevices(c for c in others if c.key not in gone)
        outcome = self._allocator.allocate(self._claims, node, holding, False)
        return isinstance(outcome, Allocation)


def _alternatives(
    request: DeviceRequest,
) -> list[tuple[int, ExactDeviceRequest | DeviceSubRequest]]:
    if request.exactly is not None:
        return [(0, request.exactly)]
    return list(enumerate(request.first_available))


def _wanted(request: DeviceRequest, sub: int) -> ExactDeviceRequest | DeviceSubRequest:
    return request.exactly if request.exactly is not None else request.first_available[sub]


def _label(claim: ResourceClaim, request: DeviceRequest, sub: int) -> str:
    name = request.name
    if request.exactly is None:
        name = f"{name}/{request.first_available[sub].name}"
    return f"request {name} of claim {claim.key}"


def _capacities(
    wanted: ExactDeviceRequest | DeviceSubRequest, verdicts: Sequence[ClaimNodeVerdict]
) -> list[str]:
    """The capacities worth asking less of: those the request names, and those a node fell
    short of (a capacity left unnamed consumes its default, often the whole device)."""
    named = list(wanted.capacity)
    short = {v.capacity.rpartition("/")[2] for v in verdicts if v.capacity}
    return named + sorted(s for s in short if s not in named)
