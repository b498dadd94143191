"""What a pod was served stays counted until it ends, whatever its tenant writes on it, across
restarts; what the kubelet gave pods the plugin did not serve counts too (issue 17)."""

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.unit.device_plugin.builders import UUID_A, UUID_B, World, scheduled_pod, world
from vgpu.adapters.fake.served import FakeServedRecord
from vgpu.app.device_plugin.keeper import OccupancyKeeper
from vgpu.domain.pod import Container, Pod
from vgpu.domain.trust import GRANT_SIGNATURE_ANNOTATION, DeviceAssignment
from vgpu.domain.vendor import NVIDIA
from vgpu.ports.kubelet import DevicePluginError

HALF_A = f"{UUID_A},NVIDIA,20000,0:;"
PHASE = "hami.io/bind-phase"
HAMI = "hami-scheduler"
RUNNING = {PHASE: "success"}


def serve(w: World, name: str, grants: str = HALF_A) -> Pod:
    """Schedule `name` as vgpu's scheduler does and serve it; the pod as it is then."""
    w.put(scheduled_pod(grants, name=name))
    w.allocator.allocate([[f"{UUID_A}-0"]])
    return w.pod(name)


def refused_over_capacity(w: World, name: str) -> str:
    """`name` (20000 MiB on card A) is refused for lack of room; the refusal."""
    w.put(scheduled_pod(HALF_A, name=name))
    with pytest.raises(DevicePluginError, match=f"card {UUID_A} would be over capacity") as err:
        w.allocator.allocate([[f"{UUID_A}-1"]])
    assert w.pod(name).annotations[PHASE] == "failed"
    return str(err.value)


def hami_pod(name: str, grants: str = HALF_A, **annotations: str) -> Pod:
    """A pod HAMi's scheduler placed here: the same annotations, no signature."""
    return scheduled_pod(grants, name=name, ring=None, scheduler=HAMI, **annotations)


def checkpoint_entry(pod: Pod, memory: str = "20000m") -> DeviceAssignment:
    """What the kubelet keeps for a container HAMi's plugin served 20000 MiB of card A."""
    envs = {
        "NVIDIA_VISIBLE_DEVICES": UUID_A,
        "CUDA_DEVICE_MEMORY_LIMIT_0": memory,
        "CUDA_DEVICE_SM_LIMIT": "0",
    }
    return DeviceAssignment(pod.uid, "main", "nvidia.com/gpu", (f"{UUID_A}-5",), envs)


TENANT_EDITS = {
    "garbled signature": {GRANT_SIGNATURE_ANNOTATION: "2026-01:forged"},
    "bind phase failed": {PHASE: "failed"},
    "grant removed": {NVIDIA.allocated_annotation: None, NVIDIA.to_allocate_annotation: None},
}


# the served record ----------------------------------------------------------------------------
@pytest.mark.parametrize("edit", TENANT_EDITS.values(), ids=TENANT_EDITS.keys())
def test_a_tenant_editing_its_served_pod_frees_nothing_also_after_a_restart(
    tmp_path: Path, edit: dict[str, str | None]
) -> None:
    w = world(tmp_path)
    serve(w, "running")

    w.cluster.patch_pod_annotations("default", "running", edit)

    message = refused_over_capacity(w, "second")
    assert "other pods here hold 1 slices, 20000 MiB" in message
    assert "default/running by its served record" in message
    restarted = world(tmp_path / "again", record=w.record)  # a new process, the same file
    restarted.cluster.put_pod(w.pod("running"))
    refused_over_capacity(restarted, "third")


def test_the_record_holds_what_was_served_before_the_answer(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(
        scheduled_pod(
            f"{UUID_A},NVIDIA,1000,0:;{UUID_B},NVIDIA,2000,0:;",
            Container("init", is_init=True, limits={"nvidia.com/gpu": 1}),
            Container("main", limits={"nvidia.com/gpu": 1}),
        )
    )

    w.allocator.allocate([[f"{UUID_A}-0"]])
    w.allocator.allocate([[f"{UUID_B}-0"]])

    assert isinstance(w.record, FakeServedRecord)
    (grant,) = w.record.grants
    assert (grant.pod_uid, grant.pod, grant.signed) == ("uid-train", "default/train", True)
    assert grant.allocated == f"{UUID_A},NVIDIA,1000,0:;{UUID_B},NVIDIA,2000,0:;"
    assert grant.init_containers == 1 and grant.served_at == "2026-01-01T00:00:00Z"
    assert w.record.saves == 1  # the second container of a recorded pod writes nothing


def test_when_the_record_cannot_be_written_nothing_is_served(tmp_path: Path) -> None:
    record = FakeServedRecord()
    record.write_error = "No space left on device"
    w = world(tmp_path, record=record)
    w.put(scheduled_pod(HALF_A))

    with pytest.raises(DevicePluginError) as err:
        w.allocator.allocate([[f"{UUID_A}-0"]])

    assert "cannot write served record memory:served.json: No space left on device" in str(
        err.value
    )
    assert "nothing is served without a record" in str(err.value)
    pod = w.pod()
    assert pod.annotations[PHASE] == "failed"
    assert pod.annotations[NVIDIA.to_allocate_annotation] == HALF_A  # nothing handed out
    assert w.lock_value() is None


def test_a_corrupt_record_is_set_aside_and_the_checkpoint_counts_what_it_held(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    record = FakeServedRecord()
    record.corrupt = "not JSON: Expecting value: line 1 column 1"
    w = world(tmp_path, record=record)
    running = w.put(scheduled_pod(HALF_A, name="running", **RUNNING), lock=False)
    w.cluster.patch_pod_annotations("default", "running", {PHASE: "failed"})  # tenant's edit
    w.checkpoint.entries = [checkpoint_entry(running)]

    with caplog.at_level(logging.ERROR):
        message = refused_over_capacity(w, "second")

    assert "default/running by its kubelet checkpoint" in message
    assert record.set_aside_count == 1
    assert "moved it to memory:served.json.corrupt" in caplog.text
    assert "counted from the kubelet's device checkpoint instead" in caplog.text


def test_a_record_that_cannot_be_read_refuses_until_it_reads_and_forgets_nothing(
    tmp_path: Path,
) -> None:
    first = world(tmp_path)
    serve(first, "running")
    assert isinstance(first.record, FakeServedRecord)
    first.record.read_error = "Input/output error"
    w = world(tmp_path / "again", record=first.record)
    w.cluster.put_pod(replace(first.pod("running"), annotations={}))  # tenant wiped it all
    w.put(scheduled_pod(HALF_A, name="second"))

    with pytest.raises(DevicePluginError, match=r"cannot read served record.*Input/output"):
        w.allocator.allocate([[f"{UUID_A}-1"]])
    assert [g.pod for g in first.record.grants] == ["default/running"]  # not overwritten

    first.record.read_error = ""
    refused_over_capacity(w, "third")


# the kubelet's checkpoint ---------------------------------------------------------------------
def test_a_pod_hami_served_counts_by_the_kubelets_checkpoint_signed_or_not(tmp_path: Path) -> None:
    w = world(tmp_path)
    hami = w.put(hami_pod("hami-running", **RUNNING), lock=False)
    w.checkpoint.entries = [checkpoint_entry(hami)]

    message = refused_over_capacity(w, "second")

    assert "default/hami-running by its kubelet checkpoint" in message


def test_an_unsigned_pod_the_kubelet_gave_no_devices_counts_for_nothing(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(hami_pod("hami-running", **RUNNING), lock=False)

    w.put(scheduled_pod(HALF_A, name="second"))

    (answer,) = w.allocator.allocate([[f"{UUID_A}-0"]])

    assert answer.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "20000m"


def test_checkpoint_entries_of_pods_that_ended_or_left_count_nothing(tmp_path: Path) -> None:
    w = world(tmp_path)
    done = w.put(replace(hami_pod("done", **RUNNING), phase="Succeeded"), lock=False)
    gone = hami_pod("gone", **RUNNING)  # deleted from the API, still in the kubelet's file
    w.checkpoint.entries = [checkpoint_entry(done), checkpoint_entry(gone)]
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,32768,100:;", name="whole"))

    (answer,) = w.allocator.allocate([[f"{UUID_A}-0"]])

    assert answer.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "32768m"


def test_an_unreadable_checkpoint_is_logged_once_and_serving_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    w = world(tmp_path)
    w.checkpoint.error = "is not JSON: Expecting value"

    with caplog.at_level(logging.ERROR):
        serve(w, "one", f"{UUID_A},NVIDIA,1000,0:;")
        serve(w, "two", f"{UUID_A},NVIDIA,1000,0:;")

    assert w.pod("two").annotations[PHASE] == "success"
    assert caplog.text.count("the kubelet's device checkpoint does not read") == 1


# what counts for nothing ----------------------------------------------------------------------
def test_forged_annotations_on_a_pod_that_asks_for_no_gpu_count_for_nothing(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, unsigned_from=frozenset({HAMI}))  # unsigned HAMi grants are believed
    forged = replace(
        hami_pod("no-gpu", f"{UUID_A},NVIDIA,32768,100:;", **RUNNING),
        containers=(Container("web"),),
    )
    w.put(forged, lock=False)

    served = serve(w, "real")

    assert served.annotations[PHASE] == "success"


def test_a_refused_pod_counts_for_nothing(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,40000,0:;", name="too-big"))
    with pytest.raises(DevicePluginError, match="would be over capacity"):
        w.allocator.allocate([[f"{UUID_A}-0"]])

    assert serve(w, "fits", f"{UUID_A},NVIDIA,32768,0:;").annotations[PHASE] == "success"


# takeover from HAMi ---------------------------------------------------------------------------
def test_taking_over_a_pod_hamis_scheduler_placed_is_served_and_recorded_unsigned(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, unsigned_from=frozenset({HAMI}))
    w.put(hami_pod("from-hami"))

    (answer,) = w.allocator.allocate([[f"{UUID_A}-0"]])

    assert answer.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "20000m"
    assert isinstance(w.record, FakeServedRecord)
    assert [(g.pod, g.signed) for g in w.record.grants] == [("default/from-hami", False)]


def test_without_takeover_a_pod_hamis_scheduler_placed_is_refused(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(hami_pod("from-hami"))

    with pytest.raises(DevicePluginError, match=r"has no vgpu\.io/grant-signature"):
        w.allocator.allocate([[f"{UUID_A}-0"]])


def test_taking_over_still_refuses_a_grant_that_would_overfill_the_card(tmp_path: Path) -> None:
    w = world(tmp_path, unsigned_from=frozenset({HAMI}))
    serve(w, "running")
    w.put(hami_pod("from-hami"))

    with pytest.raises(DevicePluginError, match=f"card {UUID_A} would be over capacity"):
        w.allocator.allocate([[f"{UUID_A}-1"]])


# the keeper -----------------------------------------------------------------------------------
def keeper_of(w: World) -> OccupancyKeeper:
    return OccupancyKeeper(w.cluster, "gpu-node-1", w.ledger, w.served, w.trust)


def test_pods_that_ended_leave_the_record_and_a_failed_pod_list_removes_nothing(
    tmp_path: Path,
) -> None:
    w = world(tmp_path)
    for name in ("finishes", "deleted", "runs"):
        serve(w, name, f"{UUID_A},NVIDIA,1000,0:;")
    w.cluster.put_pod(replace(w.pod("finishes"), phase="Succeeded"))
    w.cluster.delete_pod("default", "deleted")
    keeper = keeper_of(w)
    w.cluster.list_pods_error = "GET /api/v1/pods: connection refused"

    assert keeper.check() is None
    assert len(w.served.entries()) == 3

    w.cluster.list_pods_error = ""
    keeper.check()

    assert isinstance(w.record, FakeServedRecord)
    assert [g.pod for g in w.record.grants] == ["default/runs"]


class ServesWhileListing:
    """The node's pods, listed a moment before `late` is served (the keeper's list is stale)."""

    def __init__(self, w: World) -> None:
        self._w = w

    def list_pods(self, node: str | None = None) -> list[Pod]:
        pods = self._w.cluster.list_pods(node)
        serve(self._w, "late", f"{UUID_A},NVIDIA,1000,0:;")
        return pods

    def __getattr__(self, name: str) -> Any:
        return getattr(self._w.cluster, name)


def test_a_pod_served_while_the_keeper_lists_the_pods_is_not_dropped(tmp_path: Path) -> None:
    w = world(tmp_path)
    keeper = OccupancyKeeper(ServesWhileListing(w), "gpu-node-1", w.ledger, w.served, w.trust)

    keeper.check()

    assert [s.grant.pod for s in w.served.entries().values()] == ["default/late"]
    keeper_of(w).check()  # a list read after it was served keeps it too, for it runs
    assert [s.grant.pod for s in w.served.entries().values()] == ["default/late"]


def test_a_tenant_cannot_move_its_unsigned_grant_between_its_containers_calls(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, signing=False)
    two = (
        Container("c0", limits={"nvidia.com/gpu": 1}),
        Container("c1", limits={"nvidia.com/gpu": 1}),
    )
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,30000,50:;{UUID_A},NVIDIA,1000,10:;", *two, ring=None))
    w.allocator.allocate([[f"{UUID_A}-0"]])
    pod = w.pod()
    moved = {
        NVIDIA.allocated_annotation: f"{UUID_A},NVIDIA,30000,50:;{UUID_B},NVIDIA,30000,50:;",
        NVIDIA.to_allocate_annotation: f";{UUID_B},NVIDIA,30000,50:;",
    }
    w.cluster.put_pod(replace(pod, annotations={**pod.annotations, **moved}))

    with pytest.raises(DevicePluginError, match="a grant does not change once served"):
        w.allocator.allocate([[f"{UUID_B}-0"]])

    (served,) = w.served.entries().values()
    assert served.grant.allocated == f"{UUID_A},NVIDIA,30000,50:;{UUID_A},NVIDIA,1000,10:;"


def test_the_keeper_counts_the_unsigned_grants_and_says_so_when_it_changes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    w = world(tmp_path, unsigned_from=frozenset({HAMI}))
    serve(w, "signed", f"{UUID_A},NVIDIA,1000,0:;")
    w.put(hami_pod("taken-over", f"{UUID_A},NVIDIA,1000,0:;"))
    w.allocator.allocate([[f"{UUID_A}-1"]])
    held = w.put(hami_pod("hami-running", f"{UUID_B},NVIDIA,1000,0:;", **RUNNING), lock=False)
    w.checkpoint.entries = [checkpoint_entry(held, "1000m")]
    keeper = keeper_of(w)

    with caplog.at_level(logging.INFO):
        assert keeper.check() == ["default/hami-running", "default/taken-over"]
        assert keeper.check() == ["default/hami-running", "default/taken-over"]
        w.cluster.delete_pod("default", "hami-running")
        w.cluster.delete_pod("default", "taken-over")
        assert keeper.check() == []

    lines = [r.getMessage() for r in caplog.records if "unsigned grants" in r.getMessage()]
    assert lines == [
        "node gpu-node-1: 2 of 3 GPU pods counted here hold unsigned grants (default/hami-running,"
        " default/taken-over): leave takeover mode, or turn signing on, only once this is 0",
        "node gpu-node-1: 0 unsigned grants counted (1 GPU pods here, all signed by vgpu's "
        "scheduler)",
    ]
