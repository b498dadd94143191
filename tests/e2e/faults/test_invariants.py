"""The invariant checker: it finds every over-commit and disagreement, and passes a clean run."""

import json
from typing import Any

import pytest

from tests.e2e.faults.cluster import FaultCluster
from tests.e2e.faults.invariants import (
    Witness,
    assert_capacity,
    assert_ledgers_agree,
    check_capacity,
    ledger_from_api,
    ledger_from_metrics,
)
from tests.e2e.k8s_emulator import node_manifest, pod_manifest
from vgpu.domain import Usage

ONE_CARD = {"nvidia.com/gpu": 1}
CARD = {"id": "GPU-a", "index": 0, "count": 2, "devmem": 10000, "devcore": 100, "type": "T4"}


def node(name: str = "n1", *cards: dict[str, Any]) -> dict[str, Any]:
    register = json.dumps(list(cards) or [CARD])
    return node_manifest(name, annotations={"hami.io/node-nvidia-register": register})


def holder(
    name: str,
    grant: str,
    *,
    reserved_on: str | None = "n1",
    bound_to: str | None = None,
    phase: str = "Pending",
    init: int = 0,
) -> dict[str, Any]:
    notes = {"hami.io/vgpu-devices-allocated": grant}
    if reserved_on:
        notes["hami.io/vgpu-node"] = reserved_on
    pod = pod_manifest(
        "default", name, annotations=notes, node_name=bound_to, phase=phase, limits=ONE_CARD
    )
    pod["spec"]["initContainers"] = [{"name": f"init{i}", "image": "busybox"} for i in range(init)]
    return pod


def problems(
    *pods: dict[str, Any],
    nodes: list[dict[str, Any]] | None = None,
    witness: Witness | None = None,
) -> list[str]:
    return [str(p) for p in check_capacity(nodes or [node()], pods, witness)]


def test_grants_within_a_card_pass() -> None:
    assert (
        problems(holder("a", "GPU-a,NVIDIA,6000,50:;"), holder("b", "GPU-a,NVIDIA,4000,50:;")) == []
    )


@pytest.mark.parametrize(
    ("grants", "over"),
    [
        (["GPU-a,NVIDIA,6000,0:;", "GPU-a,NVIDIA,6000,0:;"], "MiB 12000 of 10000"),
        (["GPU-a,NVIDIA,1,60:;", "GPU-a,NVIDIA,1,60:;"], "cores 120 of 100"),
        (["GPU-a,NVIDIA,1,0:;"] * 3, "slices 3 of 2"),
    ],
)
def test_an_over_committed_card_is_reported_with_its_pods(grants: list[str], over: str) -> None:
    pods = [holder(f"p{i}", g) for i, g in enumerate(grants)]
    found = problems(*pods)
    assert len(found) == 1
    assert "card GPU-a on n1" in found[0] and over in found[0]
    assert all(f"default/p{i}" in found[0] for i in range(len(grants)))


def test_bound_and_reserved_pods_count_finished_ones_do_not() -> None:
    full = "GPU-a,NVIDIA,10000,0:;"
    assert problems(holder("a", full, bound_to="n1"), holder("b", full)) != []
    assert problems(holder("a", full, bound_to="n1", reserved_on=None), holder("b", full)) != []
    assert problems(holder("a", full, phase="Succeeded"), holder("b", full)) == []
    assert problems(holder("a", full, phase="Failed"), holder("b", full)) == []
    assert problems(holder("a", full, reserved_on=None), holder("b", full)) == []


def test_a_bound_pod_that_asks_for_no_card_holds_nothing_whatever_its_annotations() -> None:
    squatter = holder("a", "GPU-a,NVIDIA,10000,0:;", bound_to="n1")
    squatter["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    assert problems(squatter, holder("b", "GPU-a,NVIDIA,10000,0:;", bound_to="n1")) == []


def test_a_witness_counts_the_grant_first_seen_on_a_bound_pod_until_it_ends() -> None:
    witness = Witness()
    running = holder("a", "GPU-a,NVIDIA,8000,0:;", bound_to="n1", phase="Running")
    running["metadata"]["uid"] = "uid-a"
    assert problems(running, witness=witness) == []
    edited = json.loads(json.dumps(running))
    del edited["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"]
    newcomer = holder("b", "GPU-a,NVIDIA,8000,0:;", bound_to="n1")

    assert problems(edited, newcomer) == []  # fooled without a witness
    assert "MiB 16000 of 10000" in problems(edited, newcomer, witness=witness)[0]
    assert ledger_from_api([edited], witness) == {"GPU-a": Usage(1, 8000, 0)}
    edited["status"]["phase"] = "Succeeded"
    assert problems(edited, newcomer, witness=witness) == []
    assert ledger_from_api([running], witness) == {"GPU-a": Usage(1, 8000, 0)}  # seen anew


def test_init_containers_count_at_their_peak_not_summed() -> None:
    # an init container and the app container, one after the other: 6000 MiB at a time
    pod = holder("a", "GPU-a,NVIDIA,6000,0:;GPU-a,NVIDIA,6000,0:;", init=1)
    assert problems(pod, holder("b", "GPU-a,NVIDIA,4000,0:;")) == []
    assert ledger_from_api([pod]) == {"GPU-a": Usage(1, 6000, 0)}


def test_a_grant_that_disagrees_with_the_binding_is_reported() -> None:
    other = {**CARD, "id": "GPU-b"}
    nodes = [node("n1"), node("n2", other)]
    found = problems(holder("a", "GPU-a,NVIDIA,100,0:;", bound_to="n2"), nodes=nodes)
    assert any("bound to n2 but its grant is for n1" in f for f in found)
    assert any("on n2 but holds GPU-a of node n1" in f for f in found)
    assert problems(holder("b", "GPU-zzz,NVIDIA,1,0:;")) == [
        "default/b: holds card GPU-zzz, which no node has"
    ]
    assert "unreadable grant" in problems(holder("c", "GPU-a,NVIDIA,lots,0:;"))[0]


def test_metrics_text_reads_back_as_a_ledger() -> None:
    labels = 'node="n1",device_uuid="GPU-a",device_index="0",device_type="T4",device_cores="100",zone="vGPU"'
    text = (
        f"hami_gpu_memory_allocated_bytes{{{labels}}} {6000 * 2**20}\n"
        f"hami_gpu_core_allocated_ratio{{{labels}}} 30\n"
        f"hami_gpu_shared_count{{{labels}}} 2\n"
        + f"hami_gpu_shared_count{{{labels.replace('GPU-a', 'GPU-idle')}}} 0\n"
    )
    assert ledger_from_metrics(text) == {"GPU-a": Usage(2, 6000, 30)}


def test_a_clean_run_passes_and_a_fresh_replica_agrees(faults: FaultCluster) -> None:
    faults.add_node("n1", cards=2, memory=10000, split=4)
    leader = faults.replica("leader")
    placed = []
    for i, memory in enumerate((6000, 3000, 5000)):
        pod = faults.create_pod(f"p{i}", memory, cores=20)
        reply = leader.process.try_filter(pod, ["n1"])
        assert reply is not None and reply["NodeNames"] == ["n1"], reply
        placed.append(pod)
    faults.api.merge_patch("/api/v1/namespaces/default/pods/p2", {"status": {"phase": "Succeeded"}})
    fresh = faults.replica("fresh")

    assert_capacity(faults.api)
    assert_ledgers_agree(faults.api, faults.scrapes(leader, fresh))
    ledger = ledger_from_api(faults.api.list_items("/api/v1/pods"))
    assert sorted(u.memory for u in ledger.values()) == [3000, 6000]


def test_the_checker_counts_grants_written_behind_the_schedulers_back(
    faults: FaultCluster,
) -> None:
    faults.add_node("n1", cards=1, memory=10000)
    for name in ("a", "b"):
        notes = {
            "hami.io/vgpu-node": "n1",
            "hami.io/vgpu-devices-allocated": "GPU-n1-0,NVIDIA,8000,0:;",
        }
        faults.api.create(
            "/api/v1/namespaces/default/pods",
            pod_manifest("default", name, annotations=notes, node_name="n1", limits=ONE_CARD),
        )
    with pytest.raises(AssertionError, match=r"MiB 16000 of 10000.*default/a, default/b"):
        assert_capacity(faults.api)
