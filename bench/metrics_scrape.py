"""Time to render the scheduler's `/metrics` (HAMi's per-card and per-container series are
computed from the state at every scrape), by cluster size.

    .venv/bin/python bench/metrics_scrape.py            # the four sizes of bench/fixture.py
    .venv/bin/python bench/metrics_scrape.py --quick    # two small sizes
"""

import argparse
import time

from fixture import FULL, NAMESPACES, QUICK, build_cluster, machine, quota_limits, stats_ms

from vgpu.app.scheduler.metrics import SchedulerMetrics
from vgpu.app.scheduler.state import SchedulerState
from vgpu.domain import NVIDIA, decode_pod_grants, limits_from_hard


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--scrapes", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(f"{'cluster':<28} {'series':>9} {'body MiB':>9} {'median ms':>10} {'max ms':>8}")
    for size in QUICK if args.quick else FULL:
        cluster = build_cluster(size)
        state = SchedulerState()
        for node, cards in cluster.devices.items():
            state.ledger.set_node(node, cards)
        for namespace in NAMESPACES:
            state.set_quota(namespace, limits_from_hard(quota_limits(size), NVIDIA))
        for pod in cluster.running:
            grants = decode_pod_grants(pod.annotation)
            state.ledger.grant(pod.key, pod.node, grants)
            state.quota.charge(pod.key, pod.namespace, grants, 0)
        metrics = SchedulerMetrics(state, NVIDIA, lambda: True)
        timings = []
        for _ in range(args.scrapes):
            started = time.perf_counter()
            body = metrics.render()
            timings.append(time.perf_counter() - started)
        lines = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        stats = stats_ms(timings)
        print(
            f"{size.label:<28} {lines:>9,} {len(body) / 2**20:>9.1f} "
            f"{stats['median_ms']:>10.1f} {max(timings) * 1000:>8.1f}"
        )


if __name__ == "__main__":
    main()
