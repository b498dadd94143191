"""kube-scheduler's structured allocation, with consumable capacity, as a pure function.

This follows the allocator of k8s.io/dynamic-resource-allocation (`structured/internal/
{incubating,experimental}/allocator_*.go`), which kube-scheduler runs per node:

- claims are allocated one after another, each request's devices one after another, each
  device taken from the node's pools in order (pools by driver and name, then slice and device
  order), backtracking to the next candidate when a later request or claim cannot be served;
  the first complete solution wins (no scoring);
- a device serves a request when it matches the class's and the request's CEL selectors, is
  not held whole by another claim (an `adminAccess` request ignores that), its capacities can
  take what the request consumes (rounded by each capacity's request policy, added to what
  allocated claims and this allocation already consume), and the claim's constraints hold
  (`matchAttribute`: one value across the devices; `distinctAttribute`: all different);
- within one request a device is taken once; a device with `allowMultipleAllocations` may be
  taken again by other requests and claims (each taking a share with its own share id and
  `consumedCapacity` listing every capacity of the device); any other device is taken whole;
- `All` takes every matching device with room, `firstAvailable` the first subrequest that can
  be served; at most 32 devices per claim.

Not modelled: taints and tolerations, partitionable devices (counters), binding conditions,
per-device node selection and node selectors on slices (a slice is on its `nodeName` or on
every node). Share ids are derived from the claim, request and device (stable across runs)
unless a generator is given.

When nothing fits, `CannotAllocate` says why for every device and request: for people
(`vgpu explain`) and for the simulator's reasons.
"""

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from vgpu.domain.dra.allocated import AllocatedDevices, DeviceId
from vgpu.domain.dra.capacity import (
    Capacity,
    CapacityError,
    Consumption,
    Shortfall,
    consumption,
    device_capacities,
    shortfall,
)
from vgpu.domain.dra.cel import DeviceView, Selector, SelectorError, compile_selector
from vgpu.domain.dra.constraints import Constraint, ConstraintError, claim_constraint
from vgpu.domain.dra.model import (
    AllocationMode,
    AllocationResult,
    Device,
    DeviceClass,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceSlice,
)
from vgpu.domain.dra.outcome import (
    Allocation,
    AllocationOutcome,
    CannotAllocate,
    DeviceProblem,
    DeviceVerdict,
    amount_text,
    policy_text,
)
from vgpu.domain.dra.pools import Pool, node_pools

MAX_RESULTS = 32  # devices per claim (AllocationResultsMaxSize)
_Requested = tuple[tuple[str, int], ...]  # a request's capacities, as a cache key
_Selection = tuple[str, int] | str | None  # see Allocator.selection
_SHARE_IDS = uuid.UUID("6a0c7e52-9d1b-4c3f-8e2a-1f5b7d9c3e40")

ShareIds = Callable[[ResourceClaim, str, DeviceId, int], str]
"""Makes the shareID of a result: (claim, request name, device, position of the result)."""


def stable_share_id(claim: ResourceClaim, request: str, device: DeviceId, index: int) -> str:
    """A share id derived from the claim (its uid, else its key), the request, the device and
    the result's position: unique within a claim, the same on every run."""
    owner = claim.uid or claim.key
    return str(uuid.uuid5(_SHARE_IDS, f"{owner}/{index}/{request}/{device}"))


@dataclass(slots=True)
class _Candidate:
    """A device of a usable pool on the node, with what the checks need, computed once."""

    id: DeviceId
    device: Device
    slice: ResourceSlice
    shared: bool
    capacities: dict[str, Capacity]
    view: DeviceView


@dataclass(slots=True)
class _Wanted:
    """A request or subrequest of one claim, as the search serves it."""

    claim: int
    name: str  # `req`, or `req/sub` for a subrequest
    base: str
    sub: str
    device_class: DeviceClass
    selectors: tuple[str, ...]
    mode: AllocationMode
    count: int
    admin: bool
    capacity: Mapping[str, int]
    all_devices: list[_Candidate] = field(default_factory=list)
    requested: "_Requested" = ()

    def __post_init__(self) -> None:
        self.requested = tuple(sorted(self.capacity.items()))


class _Fatal(Exception):
    """Allocation stops with an error (CannotAllocate.problem)."""


class Allocator:
    """Allocates claims on a node from these slices and device classes.

    Build it once for a cluster's slices and classes (it caches pools per node, compiled
    selectors and their results per device); `allocate` takes the claims and what allocated
    claims already hold. Reusable and deterministic.
    """

    def __init__(
        self,
        slices: Iterable[ResourceSlice],
        classes: Iterable[DeviceClass],
        share_ids: ShareIds = stable_share_id,
    ) -> None:
        self._slices = tuple(slices)
        self._classes = {c.name: c for c in classes}
        self._share_ids = share_ids
        self._pools: dict[str, tuple[list[Pool], list[_Candidate]]] = {}
        self._compiled: dict[str, Selector | SelectorError] = {}
        self._matches: dict[tuple[DeviceId, str], bool | SelectorError] = {}
        # what depends only on a request and a device, kept across calls
        self._selections: dict[tuple[str, tuple[str, ...], DeviceId], _Selection] = {}
        self._consumptions: dict[tuple[_Requested, DeviceId], Consumption | Shortfall] = {}

    @property
    def classes(self) -> Mapping[str, DeviceClass]:
        """The DeviceClasses requests may name, by name."""
        return self._classes

    def nodes(self) -> list[str]:
        """The nodes slices are published for, by name."""
        return sorted({s.node_name for s in self._slices if s.node_name is not None})

    def candidates(self, node: str) -> list[_Candidate]:
        """The devices of the node's usable pools, in the order they are tried."""
        return self._node(node)[1]

    def allocate(
        self,
        claims: Sequence[ResourceClaim],
        node: str,
        allocated: AllocatedDevices,
        explain: bool = True,
    ) -> AllocationOutcome:
        """Allocate every claim on `node`, or say why that cannot be done (per device and
        request only with `explain`: a simulator trying many nodes can do without)."""
        pools, candidates = self._node(node)
        search = _Search(self, claims, node, pools, candidates, allocated)
        try:
            search.prepare()
            if search.one(0, 0, 0, 0, False, 0):
                return Allocation(node, search.outcome())
        except _Fatal as exc:
            return CannotAllocate(node, str(exc))
        except CapacityError as exc:
            return CannotAllocate(node, f"claim {search.current}: {exc}")
        invalid = [p for p in pools if p.invalid]
        if invalid:
            return CannotAllocate(
                node,
                f"invalid resource pools were encountered: {invalid[0].label}: "
                f"{invalid[0].invalid}",
            )
        if not explain:
            return CannotAllocate(node)
        try:
            verdicts, unmet = search.diagnose()
        except _Fatal as exc:
            return CannotAllocate(node, str(exc))
        return CannotAllocate(node, "", verdicts, unmet)

    def selects(self, expression: str, candidate: _Candidate) -> bool:
        """Whether the device matches the selector (cached); SelectorError when it fails."""
        key = (candidate.id, expression)
        found = self._matches.get(key)
        if found is None:
            compiled = self._compiled.get(expression)
            if compiled is None:
                try:
                    compiled = compile_selector(expression)
                except SelectorError as exc:
                    compiled = exc
                self._compiled[expression] = compiled
            if isinstance(compiled, SelectorError):
                found = compiled
            else:
                try:
                    found = compiled.matches(candidate.view)
                except SelectorError as exc:
                    found = exc
            self._matches[key] = found
        if isinstance(found, SelectorError):
            raise found
        return found

    def selection(self, wanted: "_Wanted", candidate: "_Candidate") -> "_Selection":
        """The first of the class's and the request's selectors the device fails, as
        ("class" or "request", index), None when it matches all, or the error message of
        one that fails to evaluate (cached per class, selectors and device)."""
        key = (wanted.device_class.name, wanted.selectors, candidate.id)
        if key in self._selections:
            return self._selections[key]
        found: _Selection = None
        for kind, expressions in (
            ("class", wanted.device_class.selectors),
            ("request", wanted.selectors),
        ):
            for i, expression in enumerate(expressions):
                try:
                    if not self.selects(expression, candidate):
                        found = (kind, i)
                except SelectorError as exc:
                    found = f"{kind} selector #{i} on device {candidate.id}: {exc}"
                if found is not None:
                    break
            if found is not None:
                break
        self._selections[key] = found
        return found

    def consumption(self, wanted: "_Wanted", candidate: "_Candidate") -> Consumption | Shortfall:
        """What the request consumes of the device, or why the device never can serve it
        (cached per request capacities and device). CapacityError passes through."""
        key = (wanted.requested, candidate.id)
        found = self._consumptions.get(key)
        if found is None:
            found = consumption(wanted.capacity, candidate.id.driver, candidate.capacities)
            self._consumptions[key] = found
        return found

    def _node(self, node: str) -> tuple[list[Pool], list[_Candidate]]:
        cached = self._pools.get(node)
        if cached is None:
            pools = node_pools(self._slices, node)
            candidates = [
                _candidate(pool, slice_, device)
                for pool in pools
                if pool.usable
                for slice_ in pool.slices
                for device in slice_.devices
            ]
            cached = self._pools[node] = (pools, candidates)
        return cached


def _candidate(pool: Pool, slice_: ResourceSlice, device: Device) -> _Candidate:
    capacities = device_capacities(device.capacity, slice_.driver)
    view = DeviceView.of(
        slice_.driver,
        device.attributes,
        {c.published: c.value for c in capacities.values()},
        device.allow_multiple_allocations,
    )
    return _Candidate(
        DeviceId(slice_.driver, pool.name, device.name),
        device,
        slice_,
        device.allow_multiple_allocations,
        capacities,
        view,
    )


class _Search:
    """One `allocate` call: the requests to serve, what this attempt has taken so far, and
    the backtracking search over the node's devices (`allocateOne` in the Go code)."""

    def __init__(
        self,
        allocator: Allocator,
        claims: Sequence[ResourceClaim],
        node: str,
        pools: list[Pool],
        candidates: list[_Candidate],
        allocated: AllocatedDevices,
    ) -> None:
        self._allocator = allocator
        self._claims = claims
        self._node = node
        self._pools = pools
        self._candidates = candidates
        self._allocated = allocated
        self._wanted: dict[tuple[int, int, int], _Wanted] = {}
        self._subrequests: dict[tuple[int, int], int] = {}
        self._constraints: list[list[Constraint]] = [[] for _ in claims]
        self._whole: dict[DeviceId, set[int]] = {}  # devices taken whole, by which claims
        self._taking: dict[DeviceId, dict[str, int]] = {}  # shares taken, per capacity
        self._results: list[list[tuple[DeviceRequestAllocationResult, _Candidate]]] = [
            [] for _ in claims
        ]
        self.current = ""

    # preparing ---------------------------------------------------------------------------
    def prepare(self) -> None:
        """Check every request and constraint (errors stop allocation, as in Go), find what
        `All` means for each request that asks for all devices."""
        for c, claim in enumerate(self._claims):
            self.current = claim.key
            least = 0
            for r, request in enumerate(claim.requests):
                if request.exactly is not None:
                    wanted = self._want(c, request.name, "", request.exactly)
                    self._wanted[(c, r, 0)] = wanted
                    least += wanted.count
                    continue
                counts = []
                for s, sub in enumerate(request.first_available):
                    wanted = self._want(c, request.name, sub.name, sub)
                    self._wanted[(c, r, s)] = wanted
                    counts.append(wanted.count)
                if not counts:
                    raise _Fatal(f"claim {claim.key}, request {request.name}: asks for nothing")
                self._subrequests[(c, r)] = len(counts)
                least += min(counts)
            if least > MAX_RESULTS:
                raise _Fatal(
                    f"claim {claim.key}: number of requested devices {least} exceeds the "
                    f"claim limit of {MAX_RESULTS}"
                )
            try:
                self._constraints[c] = [
                    claim_constraint(claim, i) for i in range(len(claim.constraints))
                ]
            except ConstraintError as exc:
                raise _Fatal(str(exc)) from None

    def _want(
        self, c: int, base: str, sub: str, request: ExactDeviceRequest | DeviceSubRequest
    ) -> _Wanted:
        claim = self._claims[c]
        name = f"{base}/{sub}" if sub else base
        class_name = request.device_class_name
        if not class_name:
            raise _Fatal(f"claim {claim.key}, request {name}: missing device class name")
        device_class = self._allocator.classes.get(class_name)
        if device_class is None:
            raise _Fatal(
                f"claim {claim.key}, request {name}: could not retrieve device class {class_name}"
            )
        admin = isinstance(request, ExactDeviceRequest) and request.admin_access
        mode = request.allocation_mode
        wanted = _Wanted(
            c,
            name,
            base,
            sub,
            device_class,
            request.selectors,
            mode,
            request.count,
            admin,
            request.capacity,
        )
        if mode is AllocationMode.ALL:
            for pool in self._pools:
                if pool.incomplete:
                    raise _Fatal(
                        f"claim {claim.key}, request {name}: asks for all devices, but resource "
                        f"pool {pool.label} is currently being updated"
                    )
                if pool.invalid:
                    raise _Fatal(
                        f"claim {claim.key}, request {name}: asks for all devices, but resource "
                        f"pool {pool.label} is currently invalid"
                    )
            wanted.all_devices = [
                d
                for d in self._candidates
                if self._selectable(wanted, d) and isinstance(self._fit(wanted, d, {}), dict)
            ]
            wanted.count = len(wanted.all_devices)
        return wanted

    # searching ---------------------------------------------------------------------------
    def one(self, c: int, r: int, s: int, d: int, in_sub: bool, start: int) -> bool:
        """Serve device `d` of request `r` (subrequest `s`) of claim `c` and everything after
        it, trying candidates from `start`; True when a full solution was found."""
        if c >= len(self._claims):
            return True
        claim = self._claims[c]
        if r >= len(claim.requests):
            return self.one(c + 1, 0, 0, 0, False, 0)
        if not in_sub and (c, r) in self._subrequests:
            return any(self.one(c, r, sub, 0, True, 0) for sub in range(self._subrequests[(c, r)]))
        wanted = self._wanted[(c, r, s)]
        if wanted.mode is AllocationMode.ALL and not wanted.all_devices:
            return False
        if d >= wanted.count:
            return self.one(c, r + 1, 0, 0, False, 0)
        if len(self._results[c]) + wanted.count - d > MAX_RESULTS:
            return False
        if wanted.mode is AllocationMode.ALL:
            candidate = wanted.all_devices[d]
            fit = self._fit(wanted, candidate, self._taking.get(candidate.id, {}))
            undo = self._take(wanted, candidate, fit, must=True) if isinstance(fit, dict) else None
            if undo is None:
                return False
            if self.one(c, r, s, d + 1, in_sub, 0):
                return True
            undo()
            return False
        for index in range(start, len(self._candidates)):
            candidate = self._candidates[index]
            if wanted.admin:
                if c in self._whole.get(candidate.id, ()):
                    continue
            elif self._in_use(candidate.id):
                continue
            if not self._selectable(wanted, candidate):
                continue
            fit = self._fit(wanted, candidate, self._taking.get(candidate.id, {}))
            if not isinstance(fit, dict):
                continue
            undo = self._take(wanted, candidate, fit, must=False)
            if undo is None:
                continue
            if self.one(c, r, s, d + 1, in_sub, index + 1):
                return True
            undo()
        return False

    def _in_use(self, device: DeviceId) -> bool:
        return self._allocated.in_use(device) or bool(self._whole.get(device))

    def _selectable(self, wanted: _Wanted, candidate: _Candidate) -> bool:
        return self._failed_selector(wanted, candidate) is None

    def _failed_selector(self, wanted: _Wanted, candidate: _Candidate) -> tuple[str, int] | None:
        """("class" or "request", selector index) of the first selector the device fails."""
        found = self._allocator.selection(wanted, candidate)
        if isinstance(found, str):
            owner = (
                f"class {wanted.device_class.name}"
                if found.startswith("class")
                else f"claim {self._claims[wanted.claim].key}"
            )
            raise _Fatal(f"{owner}: {found.partition(' ')[2]}")
        return found

    def _fit(
        self, wanted: _Wanted, candidate: _Candidate, taking: Mapping[str, int]
    ) -> dict[str, int] | Shortfall:
        self.current = self._claims[wanted.claim].key
        found = self._allocator.consumption(wanted, candidate)
        if isinstance(found, Shortfall):
            return found
        short = shortfall(
            found, candidate.capacities, self._allocated.consumed(candidate.id), taking
        )
        return found.amounts if short is None else short

    def _take(
        self, wanted: _Wanted, candidate: _Candidate, consumed: dict[str, int], must: bool
    ) -> Callable[[], None] | None:
        """Take the device for the request if the constraints allow; the function that gives
        it back, or None."""
        c, device = wanted.claim, candidate.id
        if not candidate.shared and wanted.admin and c in self._whole.get(device, ()):
            return None
        if not wanted.admin and self._in_use(device):
            return None
        constraints = self._constraints[c]
        for i, constraint in enumerate(constraints):
            if not constraint.add(wanted, candidate.device, candidate.id.driver):
                if must:
                    raise _Fatal(
                        f"claim {self._claims[c].key}, request {wanted.name}: cannot add device "
                        f"{device} because a claim constraint would not be satisfied"
                    )
                for earlier in constraints[:i]:
                    earlier.remove(wanted)
                return None
        share_id = None
        consumed_capacity: dict[str, int] = {}
        if candidate.shared:
            taking = self._taking.setdefault(device, {})
            for key, amount in consumed.items():
                taking[key] = taking.get(key, 0) + amount
            share_id = self._allocator_share_id(wanted, candidate)
            consumed_capacity = {candidate.capacities[k].published: v for k, v in consumed.items()}
        else:
            self._whole.setdefault(device, set()).add(c)
        result = DeviceRequestAllocationResult(
            wanted.name,
            device.driver,
            device.pool,
            device.device,
            wanted.admin,
            share_id,
            consumed_capacity,
        )
        self._results[c].append((result, candidate))

        def undo() -> None:
            for constraint in constraints:
                constraint.remove(wanted)
            self._results[c].pop()
            if candidate.shared:
                taking = self._taking[device]
                for key, amount in consumed.items():
                    taking[key] -= amount
            else:
                self._whole[device].discard(c)

        return undo

    def _allocator_share_id(self, wanted: _Wanted, candidate: _Candidate) -> str:
        claim = self._claims[wanted.claim]
        index = len(self._results[wanted.claim])
        return self._allocator._share_ids(claim, wanted.name, candidate.id, index)

    def outcome(self) -> tuple[AllocationResult, ...]:
        """The allocation of every claim (node-local devices tie it to the node)."""
        found = []
        for results in self._results:
            local = any(candidate.slice.node_name is not None for _, candidate in results)
            found.append(
                AllocationResult(tuple(r for r, _ in results), self._node if local else None)
            )
        return tuple(found)

    # explaining --------------------------------------------------------------------------
    def diagnose(self) -> tuple[tuple[DeviceVerdict, ...], tuple[str, ...]]:
        """For each request and device: could it serve the request alone, as the cluster is?"""
        verdicts: list[DeviceVerdict] = []
        unmet: list[str] = []
        for (c, _, _), wanted in self._wanted.items():
            claim = self._claims[c].key
            able = 0
            for candidate in self._candidates:
                verdict = self._verdict(claim, wanted, candidate)
                verdicts.append(verdict)
                able += verdict.problem is None
            needs = 1 if wanted.mode is AllocationMode.ALL else wanted.count
            if able < needs:
                noun = "device" if able == 1 else "devices"
                what = "at least one" if wanted.mode is AllocationMode.ALL else str(needs)
                unmet.append(
                    f"claim {claim}, request {wanted.name}: {able} {noun} on {self._node} could "
                    f"serve it, it needs {what}"
                )
        return tuple(verdicts), tuple(unmet)

    def _verdict(self, claim: str, wanted: _Wanted, candidate: _Candidate) -> DeviceVerdict:
        def refused(
            problem: DeviceProblem, sentence: str, capacity: str = "", short: int = 0
        ) -> DeviceVerdict:
            return DeviceVerdict(
                claim, wanted.name, candidate.id, problem, sentence, capacity, short
            )

        failed = self._failed_selector(wanted, candidate)
        if failed is not None:
            kind, index = failed
            if kind == "class":
                return refused(
                    DeviceProblem.CLASS,
                    f"is not of device class {wanted.device_class.name} (selector #{index})",
                )
            return refused(
                DeviceProblem.SELECTOR,
                f"does not match selector #{index}: {wanted.selectors[index]}",
            )
        if not wanted.admin and self._allocated.in_use(candidate.id):
            holders = ", ".join(sorted(self._allocated.holders(candidate.id)))
            return refused(DeviceProblem.IN_USE, f"is allocated whole to {holders}")
        fit = self._fit(wanted, candidate, {})
        if isinstance(fit, dict):
            return DeviceVerdict(claim, wanted.name, candidate.id, None, "could serve it")
        name = fit.capacity.removeprefix(f"{candidate.id.driver}/")
        if fit.kind == "missing":
            return refused(DeviceProblem.NO_CAPACITY, f"has no capacity {name}", fit.capacity)
        cap = candidate.capacities[fit.capacity]
        shown = amount_text(fit.capacity, fit.consumed)
        rounded = ""
        if fit.asked != fit.consumed:
            rounded = f" (rounded up from {amount_text(fit.capacity, fit.asked)})"
        if fit.kind == "policy":
            valid = cap.policy.valid_range if cap.policy is not None else None
            if valid is not None and valid.max is not None and fit.consumed > valid.max:
                most = amount_text(fit.capacity, valid.max)
                return refused(
                    DeviceProblem.POLICY,
                    f"{name}: {shown}{rounded} is more than one claim may take ({most})",
                    fit.capacity,
                    fit.consumed - valid.max,
                )
            return refused(
                DeviceProblem.POLICY,
                f"{name}: {shown}{rounded} is not allowed by its request policy "
                f"({policy_text(fit.capacity, cap)})",
                fit.capacity,
            )
        return refused(
            DeviceProblem.INSUFFICIENT,
            f"{name}: needs {shown}{rounded}, {amount_text(fit.capacity, fit.free)} free of "
            f"{amount_text(fit.capacity, fit.value)}",
            fit.capacity,
            fit.consumed - fit.free,
        )


def allocate(
    claims: Sequence[ResourceClaim],
    node: str,
    slices: Iterable[ResourceSlice],
    classes: Iterable[DeviceClass],
    allocated: Iterable[ResourceClaim] = (),
) -> AllocationOutcome:
    """Allocate `claims` on `node` from `slices`, with `allocated` claims holding what they
    hold: one call of kube-scheduler's allocator. (Build an `Allocator` to ask many times.)"""
    return Allocator(slices, classes).allocate(claims, node, AllocatedDevices(allocated))
