"""The live scheduler's `fgd` and `fgd-balanced` place Alibaba's openb trace where the replay
does, pod for pod and card for card, through HTTP `/filter` and `/bind` (kube-scheduler's
calls), with the nodes' CPU and memory and the pods' requests counted as the replay counts them.

A tenth of the openb nodes keeps each run to a few seconds; `bench/fgd_trace_http.py` drives
the whole trace. `gpuspec33` pins a third of the GPU pods to card models, which FGD-balanced's
claims price (from the cluster's cards the scheduler counts), so it runs there too.
"""

import random
from pathlib import Path

import pytest

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
from vgpu.domain.fragmentation import MILLI, PaperPolicy, placement_policy


@pytest.mark.parametrize(
    ("policy", "workload"),
    [("fgd", "default"), ("fgd-balanced", "default"), ("fgd-balanced", "gpuspec33")],
)
def test_the_live_policy_over_http_makes_the_replays_decisions_pod_for_pod(
    launch: Launch, tmp_path: Path, policy: str, workload: str
) -> None:
    pods = Path(str(shipped_pods(workload)))
    trace = Trace.of(workload, read_nodes(shipped_nodes()), read_pods(pods))
    nodes = trace.nodes[::10]  # 122 nodes of every model but A10 (2 nodes)
    cards = sum(len(n.free) for n in nodes)
    rng = random.Random(42)
    stream = until_arrived(arrivals(trace.pods, cards * MILLI, rng), cards, 100)
    ranks = node_ranks(len(nodes), rng)
    ordered = [node for _, node in sorted(zip(ranks, nodes, strict=True), key=lambda x: x[0])]
    rules = placement_policy(PaperPolicy(policy), trace.workload, rng, ordered)
    replay = NodeIndex(ordered, range(len(ordered)), rules)
    path = cluster_file(tmp_path / "cluster.json", ordered)
    scheduler = launch("--fake-cluster", str(path), env=start_env(policy, pods))
    extender = Extender(scheduler.extender_port)
    try:
        outcome = drive(extender, ordered, stream, replay)
    finally:
        extender.close()
    assert outcome.diverged is None, f"pod p{outcome.diverged} went elsewhere than in the replay"
    assert outcome.compared == len(stream) > 500
    assert sum(1 for node in outcome.nodes if node is None) > 0  # the cluster does fill up
    assert granted_cards(scheduler.scrape.get("/metrics").text) == outcome.expected_cards
