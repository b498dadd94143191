"""FGD against variants that try to leave fewer GPU slices stranded, on the FGD paper's protocol
(`vgpu simulate --trace`): the allocation at 100 % and 130 % arrived per workload, mean and
spread over the seeds. Prints; asserts nothing.

    .venv/bin/python bench/fgd_variants.py                                  # 3 workloads x 5 seeds
    .venv/bin/python bench/fgd_variants.py --workloads default --seeds 10 --variants fgd,coarse+cpu

Variants (node score; ties still go to the lowest rank):
  fgd          the paper's: floor(100 sigma(gain / 1000)), gain = the drop in fragmentation
  coarse       floor(50 sigma(gain / 1000)): half the resolution, so more ties go to the rank
  bestfit      fgd's score, ties broken by BestFit's (less CPU and GPU left) before the rank
  cpu          fgd's score; a CPU-only pod's ties go to the node with the least free GPU
  coarse+cpu   both
  packing      fgd's score, ties broken by GpuPacking's
"""

import argparse
import math
import statistics
from collections.abc import Callable, Sequence

from vgpu.app.simulate.trace.command import load
from vgpu.app.simulate.trace.index import NodeIndex
from vgpu.app.simulate.trace.replay import Trace, replay
from vgpu.domain.fragmentation import (
    MILLI,
    Fgd,
    MilliNode,
    MilliPod,
    PaperPolicy,
    RandomPlacement,
    Scored,
    best_fit,
    fitting_cards,
    gpu_packing,
    place,
    whole_cards,
)

Tiebreak = Callable[[MilliNode, MilliPod], int]  # 0..999, higher wins among equal scores


class Variant:
    """FGD's gain, quantised to `levels` scores, then `tiebreak`."""

    def __init__(self, fgd: Fgd, levels: int, tiebreak: Tiebreak | None) -> None:
        self._fgd = fgd
        self._levels = levels
        self._tiebreak = tiebreak
        self._gains: dict[tuple[object, ...], float] = {}

    def score(self, node: MilliNode, pod: MilliPod) -> int:
        x = self._gain(node, pod) / MILLI
        score = math.floor(self._levels / (1 + math.exp(-x)))
        return score * 1000 + (self._tiebreak(node, pod) if self._tiebreak else 0)

    def cards(self, node: MilliNode, pod: MilliPod) -> tuple[int, ...]:
        return self._fgd.cards(node, pod)

    def _gain(self, node: MilliNode, pod: MilliPod) -> float:
        key = (node.model, node.cpu, tuple(sorted(node.free)), pod.cpu, pod.gpus, pod.milli)
        gain = self._gains.get(key)
        if gain is None:
            before = self._fgd.fragmentation(node)
            if not pod.gpus:
                options = [()]
            elif pod.milli >= MILLI:
                options = [whole_cards(node, pod.gpus)]
            else:
                options = [(card,) for card in fitting_cards(node, pod.milli)]
            gain = self._gains[key] = max(
                before - self._fgd.fragmentation(place(node, pod, cards)) for cards in options
            )
        return gain


def to_gpu_poor(node: MilliNode, pod: MilliPod) -> int:
    return 0 if pod.gpus else 999 - node.free_milli * 999 // (8 * MILLI)


VARIANTS: dict[str, tuple[int, Tiebreak | None]] = {
    "fgd": (100, None),
    "coarse": (50, None),
    "bestfit": (100, lambda node, pod: best_fit(node, pod) * 9),
    "cpu": (100, to_gpu_poor),
    "coarse+cpu": (50, to_gpu_poor),
    "packing": (100, lambda node, pod: gpu_packing(node, pod) * 9),
}


def run(trace: Trace, variant: str, seeds: Sequence[int]) -> list[tuple[float, float]]:
    levels, tiebreak = VARIANTS[variant]

    def search(
        nodes: Sequence[MilliNode], ranks: Sequence[int], _: Scored | RandomPlacement
    ) -> NodeIndex:
        return NodeIndex(nodes, ranks, Variant(Fgd(trace.workload), levels, tiebreak))

    results = []
    for seed in seeds:
        done = replay(trace, PaperPolicy.FGD, seed, search)
        results.append((done.allocation[100], done.allocation[130]))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="default,gpushare100,gpuspec33")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    seeds = range(args.seed, args.seed + args.seeds)
    print(f"seeds {seeds[0]}..{seeds[-1]}; allocation at 100 % and 130 % arrived, mean ±sd")
    for workload in args.workloads.split(","):
        trace = load(workload, None)
        baseline = None
        for variant in args.variants.split(","):
            results = run(trace, variant, seeds)
            at_100 = [a for a, _ in results]
            mean = statistics.fmean(at_100)
            baseline = mean if baseline is None else baseline
            spread = statistics.stdev(at_100) if len(at_100) > 1 else 0.0
            late = statistics.fmean(b for _, b in results)
            print(
                f"{workload:<12} {variant:<11} {mean:6.2f} ±{spread:.2f}  "
                f"{mean - baseline:+.2f} vs the first  at 130 %: {late:6.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
