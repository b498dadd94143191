"""Cost of HAMi's `topology-aware` choice: every k-subset of the candidate cards is scored.

The number of subsets grows as C(n, k), so this prints the time of one `choose_cards` call for
the card counts nodes have (4, 8, 16 GPUs) and each request size, with all pairs NVLinked.

    .venv/bin/python bench/topology_choice.py
"""

import statistics
import time
from math import comb

from vgpu.domain.topology import GpuLink, PcieLink, choose_cards, pair_scores


def scores(n: int) -> dict[str, dict[str, int]]:
    cards = [f"GPU-{i}" for i in range(n)]
    links = [
        GpuLink(
            a,
            b,
            PcieLink.SINGLE_SWITCH if (i // 2) == (j // 2) else PcieLink.CROSS_CPU,
            (i + j) % 4,
        )
        for i, a in enumerate(cards)
        for j, b in enumerate(cards)
        if a != b
    ]
    return pair_scores(links).scores


def timed(cards: list[str], k: int, table: dict[str, dict[str, int]]) -> float:
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        choose_cards(cards, k, table)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs) * 1000


def main() -> None:
    print(f"{'cards':>5} {'want':>4} {'subsets':>8} {'median ms':>10}")
    for n in (4, 8, 16):
        table = scores(n)
        cards = list(table)
        for k in sorted({1, 2, n // 4, n // 2, n - 1} - {0}):
            subsets = n if k == 1 else comb(n, k)
            print(f"{n:>5} {k:>4} {subsets:>8} {timed(cards, k, table):>10.3f}")


if __name__ == "__main__":
    main()
