"""The FGD paper's replay protocol: which pods arrive and in which order, and how nodes tie.

The trace's pods, in name order, are shuffled with the seed; then the stream is tuned to ask
for `LOAD` times the cluster's GPU: pods drawn at random from the whole trace (with
replacement) are appended until the next draw would pass that, or, when the trace asks for
more, random pods are removed until it does not. Every node gets a distinct random rank, and
among equally good nodes the lowest rank wins.
"""

import random
from collections.abc import Sequence

from vgpu.domain.fragmentation import MilliPod

LOAD = 1.3


def arrivals(
    pods: Sequence[MilliPod], capacity: int, rng: random.Random, load: float = LOAD
) -> list[MilliPod]:
    """The stream of pods for a cluster of `capacity` milli-GPU. The test for the next draw
    adds its per-card milli, the total its whole request, as the paper's artifact does.

    >>> share, whole = MilliPod(gpus=1, milli=500), MilliPod(gpus=2, milli=1000)
    >>> stream = arrivals([share, whole], capacity=4000, rng=random.Random(1))
    >>> total = sum(p.gpu_milli for p in stream)
    >>> total - 2000 <= 1.3 * 4000 < total + 1000  # a draw that stopped it would pass 5,200
    True
    """
    stream = list(pods)
    rng.shuffle(stream)
    target = load * capacity
    total = sum(p.gpu_milli for p in stream)
    if total > target:
        while total > target:
            total -= stream.pop(rng.randrange(len(stream))).gpu_milli
        return stream
    if not any(p.gpus for p in pods):
        return stream  # no draw would ever reach the target
    while True:
        extra = rng.choice(pods)
        if total + extra.milli > target:
            return stream
        stream.append(extra)
        total += extra.gpu_milli


def node_ranks(count: int, rng: random.Random) -> list[int]:
    """Each node's rank (by the node's position): a random permutation of 0 .. count - 1."""
    order = list(range(count))
    rng.shuffle(order)
    ranks = [0] * count
    for rank, node in enumerate(order):
        ranks[node] = rank
    return ranks


def percent(milli: int, cards: int) -> int:
    """`milli` as a whole percent of `cards` GPUs, the paper's way (round half to even).

    >>> percent(62_120 * 100 + 31_060, 6212), percent(62_120 * 101 + 31_060, 6212)
    (100, 102)
    """
    return round(milli / cards / 10)


def share(milli: int, cards: int) -> float:
    """`milli` as a percent of `cards` GPUs with two decimals."""
    return round(milli / cards / 10, 2)
