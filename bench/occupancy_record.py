"""What the scheduler's occupancy record (`vgpu.io/occupancy` on each Node) costs: the patch a
bind computes for its node (on the bind path, inside the node lock), reading a changed record
(every replica, on the node's event after each write), and one background pass of the leader's
recorder with every counted pod already recorded (every 2 s). In memory: the fake cluster
applies a write at once, so the figures are CPU, not API round trips.

    .venv/bin/python bench/occupancy_record.py            # records of 20, 100 and 700 pods
    .venv/bin/python bench/occupancy_record.py --quick

Only public calls of the scheduler's recorder are used, so the same script measures another
checkout for a side-by-side figure: `PYTHONPATH=<checkout>/src .venv/bin/python bench/...`.
"""

import argparse
import time
import uuid

from fixture import machine, stats_ms

import vgpu
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.app.scheduler.fence import Fence
from vgpu.app.scheduler.occupancy import Held, OccupancyBook
from vgpu.app.scheduler.recorder import OccupancyRecorder
from vgpu.domain import ClusterNode, Pod, decode_pod_grants
from vgpu.domain.initrelease import InitProgress
from vgpu.domain.trust import OCCUPANCY_ANNOTATION, GrantClaim, decode_occupancy_record

TIME = "1750000000"


def grant(node: str, card: int) -> str:
    return f"GPU-{uuid.UUID(int=card)}-{node},NVIDIA,8000,30:;"


def held(node: str, index: int) -> Held:
    uid = str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{node}-{index}"))
    claim = GrantClaim(uid, node, TIME, grant(node, index % 8))
    pod = f"training/job-{node}-{index:04}"
    return Held(pod, uid, node, claim, decode_pod_grants(claim.allocated), True, InitProgress(0))


def recorded_world(nodes: int, pods: int) -> tuple[FakeCluster, OccupancyBook, OccupancyRecorder]:
    """`nodes` nodes with `pods` counted pods each, every one recorded."""
    cluster = FakeCluster()
    book = OccupancyBook()
    recorder = OccupancyRecorder(cluster, book, Fence(lambda: True))
    for n in range(nodes):
        name = f"node-{n:04}"
        cluster.put_node(ClusterNode(name, {}))
        for i in range(pods):
            book.hold(held(name, i))
    recorder.record_now()
    return cluster, book, recorder


def bind_patch_ms(pods: int, calls: int) -> dict[str, float]:
    """The record patch of one more pod's bind on a node whose record has `pods` entries."""
    cluster, _, recorder = recorded_world(1, pods)
    node = cluster.get_node("node-0000")
    assert node is not None
    timings = []
    for i in range(calls):
        uid = str(uuid.uuid4())
        pod = Pod("training", f"new-{i}", uid=uid)
        claim = GrantClaim(uid, "node-0000", TIME, grant("node-0000", i % 8))
        started = time.perf_counter()
        write = recorder.for_bind(pod, "node-0000", claim)
        patch = write(node.annotations)
        timings.append(time.perf_counter() - started)
        assert patch, "the bind's pod must be recorded"
    return stats_ms(timings)


def read_ms(pods: int, calls: int) -> dict[str, float]:
    """Decoding a node's record of `pods` entries, as the follower does when it changed."""
    cluster, _, _ = recorded_world(1, pods)
    node = cluster.get_node("node-0000")
    assert node is not None
    text = node.annotations[OCCUPANCY_ANNOTATION]
    timings = []
    for _ in range(calls):
        started = time.perf_counter()
        record = decode_occupancy_record(text)
        timings.append(time.perf_counter() - started)
        assert len(record.entries) == pods
    return stats_ms(timings)


def pass_ms(nodes: int, pods: int, passes: int) -> dict[str, float]:
    """One recorder pass over `nodes` x `pods` counted pods, all recorded: nothing to write."""
    _, _, recorder = recorded_world(nodes, pods)
    timings = []
    for _ in range(passes):
        started = time.perf_counter()
        written = recorder.record_now()
        timings.append(time.perf_counter() - started)
        assert written == 0
    return stats_ms(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    calls, passes = (50, 5) if args.quick else (300, 20)
    print(f"machine: {machine()}")
    print(f"code: {vgpu.__file__}")
    for title, measure in (("bind patch", bind_patch_ms), ("reading a changed record", read_ms)):
        print(f"{f'{title}, record of':<32} {'median ms':>10} {'p99 ms':>8}")
        for pods in (20, 100, 700):
            stats = measure(pods, calls)
            print(f"{f'{pods} pods':<32} {stats['median_ms']:>10.3f} {stats['p99_ms']:>8.3f}")
    print(f"{'recorder pass, all recorded':<32} {'median ms':>10} {'p99 ms':>8}")
    for nodes, pods in ((100, 20), (1000, 20)):
        stats = pass_ms(nodes, pods, passes)
        label = f"{nodes} nodes x {pods} pods"
        print(f"{label:<32} {stats['median_ms']:>10.3f} {stats['p99_ms']:>8.3f}")


if __name__ == "__main__":
    main()
