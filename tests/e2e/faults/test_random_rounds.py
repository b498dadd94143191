"""Hundreds of seeded rounds of concurrent filter/bind under random API faults (workload.py).

`VGPU_FAULT_SEED` and `VGPU_FAULT_ROUNDS` replay or lengthen a run; a failure names the round,
its seed and the faults it drew. The control run without faults shows that the rounds and the
checks themselves report nothing when nothing goes wrong.
"""

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.e2e.faults.cluster import FaultCluster, LockReleaser
from tests.e2e.faults.workload import SPREAD, RandomRounds

SEED = int(os.environ.get("VGPU_FAULT_SEED", "1"))
ROUNDS = int(os.environ.get("VGPU_FAULT_ROUNDS", "150"))

MakeRounds = Callable[..., RandomRounds]
pytestmark = pytest.mark.long


@pytest.fixture()
def make_rounds(faults: FaultCluster) -> Iterator[MakeRounds]:
    """Three nodes of two 10000 MiB cards (4 slices each), one scheduler, locks released."""
    for name in ("n1", "n2", "n3"):
        faults.add_node(name, cards=2, memory=10000, split=4)
    replica = faults.replica("leader", env=SPREAD)
    made: list[RandomRounds] = []

    def make(**options: Any) -> RandomRounds:
        made.append(RandomRounds(faults, replica, seed=SEED, **options))
        return made[-1]

    with LockReleaser(faults.api).running():
        yield make
    for runner in made:
        runner.close()


def test_random_faults_never_break_an_invariant(make_rounds: MakeRounds) -> None:
    figures = make_rounds(concurrency=4).run(rounds=ROUNDS)
    assert not figures.violations, "\n".join(figures.violations)
    assert figures.rounds == ROUNDS
    assert figures.faults_injected > ROUNDS // 2 and figures.bound > 0, figures.summary()


def test_the_rounds_report_nothing_when_nothing_goes_wrong(
    faults: FaultCluster, make_rounds: MakeRounds
) -> None:
    # no faults, one pod at a time, the node lock released at once after each bind
    rounds = make_rounds(concurrency=1, faults=False, after_bind=faults.release_lock)
    figures = rounds.run(rounds=40)
    assert not figures.violations, "\n".join(figures.violations)
    assert figures.faults_injected == 0 and figures.bound > 10, figures.summary()
