"""One experiment of the FGD paper's protocol: a trace, a policy and a seed.

The policy is one of the paper's (on the milli-GPU model, `index.py`) or one of HAMi's node/GPU
pairs (through vgpu's scheduler, `hami_pairs.py`); both see the same stream and node ranks.

Pods are scheduled one at a time and never leave; a pod that fits nowhere fails at once and
still counts as arrived. After every pod the arrived GPU (as a whole percent of the cluster's)
and the allocated GPU (a percent with two decimals) are noted; the *allocation ratio at x %*
is the mean allocated share over the pods at which x % had arrived (x - 1 .. x + 1 when no pod
lands exactly on x).
"""

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from vgpu.domain.fragmentation import (
    MILLI,
    MilliNode,
    MilliPod,
    MilliWorkload,
    PaperPolicy,
    RandomPlacement,
    Scored,
    placement_policy,
    typical_shapes,
)

from ..dra import DraMode
from ..engine import PolicyPair
from .dra_pairs import DraPair
from .files import TraceNode, TracePod
from .hami_pairs import HamiPair
from .index import NodeIndex
from .protocol import LOAD, arrivals, node_ranks, percent, share

TracePolicy = PaperPolicy | PolicyPair | DraMode


def policy_name(policy: TracePolicy) -> str:
    """`fgd`, `bestfit`, ... or `binpack/spread`, ..., or `dra`."""
    return policy.label if isinstance(policy, PolicyPair) else policy.value


@dataclass(frozen=True, slots=True)
class Trace:
    """A cluster and the pods to replay on it (in name order), with the typical shapes FGD
    measures fragmentation against (those of these pods)."""

    name: str
    nodes: tuple[MilliNode, ...]
    pods: tuple[MilliPod, ...]
    workload: MilliWorkload

    @property
    def cards(self) -> int:
        return sum(len(n.free) for n in self.nodes)

    @classmethod
    def of(cls, name: str, nodes: Sequence[TraceNode], pods: Sequence[TracePod]) -> "Trace":
        ordered = tuple(p.pod for p in sorted(pods, key=lambda p: p.name))
        shapes = typical_shapes(ordered)
        return cls(name, tuple(n.node for n in nodes), ordered, MilliWorkload(shapes))


@dataclass(frozen=True, slots=True)
class Replay:
    """What one experiment gave: the allocation ratio (percent) at each arrived percent."""

    policy: TracePolicy
    seed: int
    pods: int  # in the stream, after tuning
    placed: int
    allocation: dict[int, float]
    wall_seconds: float
    cpu_seconds: float

    @property
    def failed(self) -> int:
        return self.pods - self.placed


class Chooser(Protocol):
    """Finds the node for each pod (`NodeIndex`, or a benchmark's baseline)."""

    def choose(self, pod: MilliPod) -> int | None: ...

    def place(self, node: int, pod: MilliPod) -> tuple[int, ...]: ...


Search = Callable[[Sequence[MilliNode], Sequence[int], Scored | RandomPlacement], Chooser]


def replay(trace: Trace, policy: TracePolicy, seed: int, search: Search = NodeIndex) -> Replay:
    """Replay `trace` under `policy` with `seed` (stream, ranks and Random's draws); `search`
    finds nodes for the paper's policies."""
    wall, cpu = time.perf_counter(), time.process_time()
    cards = trace.cards
    rng = random.Random(seed)
    stream = arrivals(trace.pods, cards * MILLI, rng)
    ranks = node_ranks(len(trace.nodes), rng)
    index: Chooser
    if isinstance(policy, PolicyPair):
        index = HamiPair(trace.nodes, ranks, policy)
    elif isinstance(policy, DraMode):
        index = DraPair(trace.nodes, ranks)
    else:
        rng = random.Random(f"{policy}-{seed}")
        rules = placement_policy(policy, trace.workload, rng, trace.nodes)
        index = search(trace.nodes, ranks, rules)
    curve = _Curve()
    arrived = used = placed = 0
    for pod in stream:
        arrived += pod.gpu_milli
        node = index.choose(pod)
        if node is not None:
            index.place(node, pod)
            used += pod.gpu_milli
            placed += 1
        curve.add(percent(arrived, cards), share(used, cards))
    return Replay(
        policy,
        seed,
        len(stream),
        placed,
        curve.allocation(round(LOAD * 100)),
        time.perf_counter() - wall,
        time.process_time() - cpu,
    )


class _Curve:
    """Allocated shares summed by arrived percent."""

    def __init__(self) -> None:
        self._sums: dict[int, float] = {}
        self._counts: dict[int, int] = {}

    def add(self, arrived: int, allocated: float) -> None:
        self._sums[arrived] = self._sums.get(arrived, 0.0) + allocated
        self._counts[arrived] = self._counts.get(arrived, 0) + 1

    def allocation(self, most: int) -> dict[int, float]:
        """The allocation ratio at each percent 0 .. `most` that pods reached.

        >>> curve = _Curve()
        >>> for arrived, allocated in ((0, 0.0), (1, 0.5), (1, 1.0), (3, 2.0)):
        ...     curve.add(arrived, allocated)
        >>> curve.allocation(4)  # 2 from its neighbours 1 and 3; none near 4 but 3
        {0: 0.0, 1: 0.75, 2: 1.17, 3: 2.0, 4: 2.0}
        """
        ratios = {}
        for x in range(most + 1):
            exact = (x,) if x in self._counts else (x - 1, x, x + 1)
            count = sum(self._counts.get(a, 0) for a in exact)
            if count:
                ratios[x] = round(sum(self._sums.get(a, 0.0) for a in exact) / count, 2)
        return ratios
