"""The preempt use case on the scheduler's state: what it keeps of kube-scheduler's proposal."""

from typing import Any

from tests.unit.scheduler.builders import A40_UUIDS, World, a40_node, manifest, signed, world
from vgpu.app.scheduler.preempt import NodeVictims, Preempter, Proposed
from vgpu.domain import pod_from_manifest


def holder(name: str, card: str, memory: int, priority: int = 0) -> dict[str, Any]:
    body = manifest(
        name,
        node="node1",
        phase="Running",
        annotations={
            "hami.io/vgpu-node": "node1",
            "hami.io/vgpu-devices-allocated": f"{card},NVIDIA,{memory},0:;",
        },
        gpu=1,
        gpumem=memory,
    )
    body["spec"]["priority"] = priority
    return signed(body)


def waiting(memory: int, priority: int = 100, **limits: Any) -> dict[str, Any]:
    body = manifest("waiting", **(limits or {"gpu": 1, "gpumem": memory}))
    body["spec"]["priority"] = priority
    return body


def setup(*pods: dict[str, Any]) -> tuple[World, Preempter]:
    w = world(a40_node("node1"))
    for body in pods:
        w.add_pod(body)
    return w, Preempter(w.state, w.config.scheduling(), w.cluster.list_pods)


def by_uid(*uids: str, pdb: int = 0) -> NodeVictims:
    return NodeVictims(tuple(Proposed(u) for u in uids), pdb)


def kept(result: Any, node: str = "node1") -> list[str]:
    return [v.uid for v in result.nodes[node].victims]


def test_a_victim_without_our_gpus_is_left_to_kube_schedulers_judgement() -> None:
    cpu_only = manifest("cpu-only", node="node1", phase="Running", uid="uid-cpu-only")
    _, preempter = setup(
        holder("a", A40_UUIDS[0], 40000),
        holder("b", A40_UUIDS[1], 40000),
        cpu_only,
    )
    proposal = by_uid("uid-a", "uid-b", "uid-cpu-only", pdb=2)
    result = preempter.preempt(waiting(30000), {"node1": proposal})
    assert kept(result) == ["uid-a", "uid-cpu-only"]
    assert result.nodes["node1"].pdb_violations == 2


def test_when_the_gpus_already_fit_the_proposal_stands() -> None:
    _, preempter = setup(holder("a", A40_UUIDS[0], 40000))
    proposal = by_uid("uid-a")
    assert kept(preempter.preempt(waiting(10000), {"node1": proposal})) == ["uid-a"]


def test_a_pod_sent_whole_needs_no_lookup() -> None:
    body = holder("a", A40_UUIDS[0], 46068)
    _, preempter = setup(body, holder("b", A40_UUIDS[1], 46068))
    proposal = NodeVictims((Proposed("uid-a", pod_from_manifest(body)),))
    assert kept(preempter.preempt(waiting(30000), {"node1": proposal})) == ["uid-a"]


def test_an_unknown_uid_is_kept_and_cannot_make_the_pod_fit() -> None:
    _, preempter = setup(holder("a", A40_UUIDS[0], 46068), holder("b", A40_UUIDS[1], 46068))
    assert preempter.preempt(waiting(30000), {"node1": by_uid("uid-ghost")}).nodes == {}


def test_an_unknown_node_is_dropped() -> None:
    _, preempter = setup(holder("a", A40_UUIDS[0], 46068))
    assert preempter.preempt(waiting(30000), {"node9": by_uid("uid-a")}).nodes == {}


def test_a_pod_without_gpus_keeps_every_proposal() -> None:
    _, preempter = setup(holder("a", A40_UUIDS[0], 46068))
    proposals = {"node1": by_uid("uid-a"), "node2": by_uid("uid-x")}
    assert preempter.preempt(manifest("plain"), proposals).nodes == proposals


def test_a_bad_request_names_the_field() -> None:
    _, preempter = setup()
    result = preempter.preempt(manifest("bad", gpu=1, gpumem="lots"), {})
    assert "nvidia.com/gpumem" in result.error


def test_a_node_sent_without_victims_is_left_out() -> None:
    _, preempter = setup(holder("a", A40_UUIDS[0], 1000))
    assert preempter.preempt(waiting(1000), {"node1": by_uid()}).nodes == {}
