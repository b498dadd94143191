"""The cluster as the FGD paper sees it: cards in thousandths of a GPU (milli-GPU).

A pod asks for CPU (milli-cores), host memory (MiB) and either nothing of a GPU, a share of one
card (1 to 999 milli) or whole cards (1000 milli each), possibly only on some card models. A
node has one card model, free CPU, free host memory, each card's free milli, and the kinds of
GPU pods it hosts. HAMi's requests map onto this exactly: a share of `m` milli is
`nvidia.com/gpu: 1` with `gpucores` and `gpumem-percentage` both `m / 10`, whole cards are
`nvidia.com/gpu: N` (all of each card's memory and cores).
"""

from dataclasses import dataclass

MILLI = 1000  # one whole card
SHARE = 0  # the kind of a pod that takes a share of one card (other kinds: its card count)


@dataclass(frozen=True, slots=True)
class MilliPod:
    """What one pod asks for. `models` are the card models it accepts (empty: any)."""

    cpu: int = 0
    memory: int = 0
    gpus: int = 0
    milli: int = 0  # per card
    models: frozenset[str] = frozenset()

    @property
    def gpu_milli(self) -> int:
        """All the GPU it asks for, in milli (the paper's arrived and allocated workload)."""
        return self.gpus * self.milli

    @property
    def kind(self) -> int | None:
        """None for a CPU-only pod, SHARE for a share of one card, else its card count."""
        if not self.gpus:
            return None
        return SHARE if self.milli < MILLI else self.gpus


@dataclass(frozen=True, slots=True)
class MilliNode:
    """One node: its card model, free CPU, free host memory, free milli per card (by index)
    and the kinds of GPU pods placed on it."""

    model: str
    cpu: int
    memory: int
    free: tuple[int, ...]
    kinds: frozenset[int] = frozenset()

    @property
    def free_milli(self) -> int:
        return sum(self.free)


def fits(node: MilliNode, pod: MilliPod) -> bool:
    """kube-scheduler's CPU and memory filter, then the GPU one: an accepted model and enough
    cards with room for the pod's share of each.

    >>> node = MilliNode("T4", cpu=8000, memory=32768, free=(1000, 300))
    >>> fits(node, MilliPod(cpu=4000, gpus=1, milli=500)), fits(node, MilliPod(gpus=2, milli=500))
    (True, False)
    >>> fits(node, MilliPod(gpus=1, milli=200, models=frozenset({"V100M16"})))
    False
    """
    if node.cpu < pod.cpu or node.memory < pod.memory:
        return False
    if not pod.gpus:
        return True
    if pod.models and node.model not in pod.models:
        return False
    milli = pod.milli
    return sum(1 for free in node.free if free >= milli) >= pod.gpus


def fitting_cards(node: MilliNode, milli: int) -> tuple[int, ...]:
    """Indexes of the cards with at least `milli` free, lowest first."""
    return tuple(i for i, free in enumerate(node.free) if free >= milli)


def whole_cards(node: MilliNode, count: int) -> tuple[int, ...]:
    """The `count` lowest-index cards nobody uses (what every policy gives whole-card pods)."""
    return tuple(i for i, free in enumerate(node.free) if free == MILLI)[:count]


def tightest_card(node: MilliNode, milli: int) -> int:
    """The card with the least free milli that still holds `milli`; the lowest index among
    equals. The node must have one.

    >>> tightest_card(MilliNode("T4", 0, 0, (1000, 400, 300, 400)), 350)
    1
    """
    return min(fitting_cards(node, milli), key=lambda i: node.free[i])


def place(node: MilliNode, pod: MilliPod, cards: tuple[int, ...]) -> MilliNode:
    """The node once `pod` holds its share of each of `cards`.

    >>> place(MilliNode("T4", 8000, 32768, (1000, 1000)), MilliPod(2000, 1024, 1, 250), (1,))
    MilliNode(model='T4', cpu=6000, memory=31744, free=(1000, 750), kinds=frozenset({0}))
    """
    free = list(node.free)
    for card in cards:
        free[card] -= pod.milli
    kind = pod.kind
    kinds = node.kinds if kind is None else node.kinds | {kind}
    return MilliNode(node.model, node.cpu - pod.cpu, node.memory - pod.memory, tuple(free), kinds)
