"""The live scheduler's `fgd` places Alibaba's openb trace where the replay's FGD does, pod for
pod and card for card, through HTTP `/filter` and `/bind` (kube-scheduler's calls), with the
nodes' CPU and memory and the pods' requests counted as the replay counts them.

A tenth of the openb nodes keeps this under a few seconds; `bench/fgd_trace_http.py` drives
the whole trace.
"""

import random
from pathlib import Path

from tests.e2e.scheduler.conftest import Launch
from tests.e2e.scheduler.trace_driver import (
    Extender,
    cluster_file,
    drive,
    granted_cards,
    start_env,
    until_arrived,
)
from vgpu.app.simulate.trace.files import read_nodes, read_pods, shipped_nodes, shipped_pods
from vgpu.app.simulate.trace.index import NodeIndex
from vgpu.app.simulate.trace.protocol import arrivals, node_ranks
from vgpu.app.simulate.trace.replay import Trace
from vgpu.domain.fragmentation import MILLI, Fgd


def test_fgd_over_http_makes_the_replays_decisions_pod_for_pod(
    launch: Launch, tmp_path: Path
) -> None:
    trace = Trace.of("default", read_nodes(shipped_nodes()), read_pods(shipped_pods("default")))
    nodes = trace.nodes[::10]  # 122 nodes of every model but A10 (2 nodes)
    cards = sum(len(n.free) for n in nodes)
    rng = random.Random(42)
    stream = until_arrived(arrivals(trace.pods, cards * MILLI, rng), cards, 100)
    ranks = node_ranks(len(nodes), rng)
    ordered = [node for _, node in sorted(zip(ranks, nodes, strict=True), key=lambda x: x[0])]
    replay = NodeIndex(ordered, range(len(ordered)), Fgd(trace.workload))
    path = cluster_file(tmp_path / "cluster.json", ordered)
    scheduler = launch(
        "--fake-cluster", str(path), env=start_env("fgd", Path(str(shipped_pods("default"))))
    )
    extender = Extender(scheduler.extender_port)
    try:
        outcome = drive(extender, ordered, stream, replay)
    finally:
        extender.close()
    assert outcome.diverged is None, f"pod p{outcome.diverged} went elsewhere than in the replay"
    assert outcome.compared == len(stream) > 500
    assert sum(1 for node in outcome.nodes if node is None) > 0  # the cluster does fill up
    assert granted_cards(scheduler.scrape.get("/metrics").text) == outcome.expected_cards
