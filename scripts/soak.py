"""Soak: the fault suite's randomized rounds for minutes, against a real scheduler process.

Starts the API emulator, GPU nodes and one `vgpu scheduler` behind a fault proxy (the same
pieces as tests/e2e/faults), then runs seeded rounds of concurrent filter/bind with random
API faults and tenants' edits of their bound pods (a garbled signature, `bind-phase: failed`,
a removed grant), checking after every round that no card is over-committed and that the
scheduler's ledger equals what the pods hold (as first seen on each bound pod). A round that
breaks an invariant is printed, its pods are deleted, and the run goes on. Figures at the end;
exit status 1 if anything was broken.

    .venv/bin/python scripts/soak.py --duration 120 --seed 7 --nodes 3 --concurrency 6
"""

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.faults.cluster import FaultCluster, LockReleaser  # noqa: E402
from tests.e2e.faults.workload import SPREAD, RandomRounds  # noqa: E402
from tests.e2e.k8s_emulator import RunningApiServer  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds to run (60)")
    parser.add_argument("--seed", type=int, default=1, help="replays the same rounds (1)")
    parser.add_argument("--nodes", type=int, default=2, help="GPU nodes, 2 cards each (2)")
    parser.add_argument(
        "--concurrency", type=int, default=4, help="pods filtered and bound at once (4)"
    )
    parser.add_argument(
        "--no-faults", action="store_true", help="a control run: no faults, no tenant edits"
    )
    args = parser.parse_args(argv)
    for name in ("duration", "nodes", "concurrency"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive, got {getattr(args, name)}")

    with RunningApiServer() as api, tempfile.TemporaryDirectory(prefix="vgpu-soak-") as work:
        cluster = FaultCluster(api, Path(work), seed=args.seed)
        try:
            for index in range(args.nodes):
                cluster.add_node(f"node{index}", cards=2, memory=10000, split=4)
            replica = cluster.replica("scheduler", env=SPREAD)
            rounds = RandomRounds(
                cluster,
                replica,
                seed=args.seed,
                concurrency=args.concurrency,
                faults=not args.no_faults,
            )
            with LockReleaser(api).running():
                figures = rounds.run(seconds=args.duration, keep_going=True)
            rounds.close()
        finally:
            cluster.close()
    for line in figures.violations:
        print(line)
    print(figures.summary())
    return 1 if figures.broken_rounds else 0


if __name__ == "__main__":
    sys.exit(main())
