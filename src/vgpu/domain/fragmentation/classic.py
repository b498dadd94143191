"""The FGD paper's baseline node scores, each an integer 0..100 (higher is better).

They read the node's free CPU `C` (milli-cores) and free GPU `U` (milli), normalised by the
largest node of the paper's cluster (`CPU_SCALE`, `GPU_SCALE`); all of them put a share of one
card on the tightest card that holds it (`tightest_card`) and whole cards on the lowest-index
free ones. Integer scores matter: ties go to one fixed node order, which packs.
"""

import math

from vgpu.domain.fragmentation.milli import MILLI, MilliNode, MilliPod, tightest_card

CPU_SCALE = 128_000  # the paper's normalisers: 128 cores and 8 cards
GPU_SCALE = 8 * MILLI


def dot_prod(node: MilliNode, pod: MilliPod) -> int:
    """DotProd: the smaller the dot product of the node's free (CPU, GPU) and the pod's
    request, both normalised, the better (the fuller node wins).

    >>> pod = MilliPod(cpu=8000, gpus=1, milli=500)
    >>> dot_prod(MilliNode("G2", 96000, 0, (1000,) * 8), pod)  # 100 (1 - (0.047 + 0.0625) / 2)
    94
    >>> dot_prod(MilliNode("G2", 16000, 0, (500,) + (0,) * 7), pod)
    99
    """
    cpu = node.cpu / CPU_SCALE * pod.cpu / CPU_SCALE
    gpu = node.free_milli / GPU_SCALE * pod.gpu_milli / GPU_SCALE
    return math.floor(100 * (1 - (cpu + gpu) / 2))


def gpu_clustering(node: MilliNode, pod: MilliPod) -> int:
    """GpuClustering: keep pods of one kind (a share of a card, or 1, 2, 4, 8 whole cards)
    together. A base of up to 25 for how much GPU is in use, plus 75 when the pod's kind is the
    node's only one, 50 when it is among the node's kinds, 25 on a node without GPU pods.
    CPU-only pods score 0 everywhere.

    >>> share = MilliPod(gpus=1, milli=300)
    >>> gpu_clustering(MilliNode("G2", 0, 0, (700,) + (1000,) * 7, frozenset({0})), share)
    75
    >>> gpu_clustering(MilliNode("G2", 0, 0, (0,) + (1000,) * 7, frozenset({1})), share)
    3
    >>> gpu_clustering(MilliNode("T4", 0, 0, (1000, 1000)), share)  # floor(25 * 6000 / 8000)
    43
    """
    kind = pod.kind
    if kind is None:
        return 0
    base = 25 * (GPU_SCALE - node.free_milli) // GPU_SCALE
    if not node.kinds:
        return base + 25
    if node.kinds == {kind}:
        return base + 75
    if kind in node.kinds:
        return base + 50
    return base


def gpu_packing(node: MilliNode, pod: MilliPod) -> int:
    """GpuPacking: fill used cards first, then used nodes, and keep idle nodes for last.

    An idle node scores max(33 - cards, cards); on a node in use, whole cards score
    max(50 - count, 33), and a share scores by its tightest card: 49 when only idle cards hold
    it, else 100 minus the tens of its free percent (at least 50). CPU-only pods score 0.

    >>> share = MilliPod(gpus=1, milli=200)
    >>> gpu_packing(MilliNode("G2", 0, 0, (1000,) * 8), share)
    25
    >>> gpu_packing(MilliNode("G2", 0, 0, (460,) + (1000,) * 7), share)  # 46 % free: 100 - 4
    96
    >>> gpu_packing(MilliNode("G2", 0, 0, (100,) + (1000,) * 7), share)  # only idle cards hold it
    49
    """
    if not pod.gpus:
        return 0
    if all(free == MILLI for free in node.free):
        cards = len(node.free)
        return max(33 - cards, cards)
    if pod.milli >= MILLI:
        return max(50 - pod.gpus, 33)
    free = node.free[tightest_card(node, pod.milli)]
    if free == MILLI:
        return 49
    return max(100 - (100 * free // MILLI) // 10, 50)


def best_fit(node: MilliNode, pod: MilliPod) -> int:
    """BestFit: the node with the least free CPU and GPU left after the pod, each normalised
    and weighed half. (The paper's artifact then rescales the feasible nodes' scores to 0..100
    with integer division, which never changes which nodes score highest: left out.)

    >>> pod = MilliPod(cpu=4000, gpus=1, milli=500)
    >>> best_fit(MilliNode("G2", 68000, 0, (1000,) * 8), pod)  # 100 (1 - 0.5 (64/128 + 7.5/8))
    28
    >>> best_fit(MilliNode("T4", 4000, 0, (500, 0)), pod)
    100
    """
    cpu = (node.cpu - pod.cpu) / CPU_SCALE
    gpu = (node.free_milli - pod.gpu_milli) / GPU_SCALE
    return math.floor(100 * (1 - (0.5 * cpu + 0.5 * gpu)))
