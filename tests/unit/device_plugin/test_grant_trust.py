"""Allocate serves only grants the scheduler wrote for that pod on this node, and only as far
as the node's own ledger has room (issue 8, item 1)."""

from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.device_plugin.builders import (
    ASSIGNED_TIME,
    NODE,
    RING,
    UUID_A,
    UUID_B,
    World,
    scheduled_pod,
    world,
)
from vgpu.domain.pod import Container, Pod
from vgpu.domain.trust import GRANT_SIGNATURE_ANNOTATION, GrantClaim, KeyRing
from vgpu.domain.vendor import NVIDIA
from vgpu.ports.kubelet import DevicePluginError

SIGNATURE = GRANT_SIGNATURE_ANNOTATION
FULL_A = f"{UUID_A},NVIDIA,32768,100:;"


def refused(w: World, name: str, match: str) -> DevicePluginError:
    """Allocate is refused naming `name` and `match`; the pod is failed with an event."""
    with pytest.raises(DevicePluginError, match=match) as err:
        w.allocator.allocate([[f"{UUID_A}-0"]])
    assert f"default/{name}" in str(err.value)
    assert w.pod(name).annotations["hami.io/bind-phase"] == "failed"
    assert [e[:3] for e in w.cluster.events if e[1] == name] == [
        ("default", name, "GPUAllocationFailed")
    ]
    return err.value


def signed_for(pod: Pod, *, uid: str | None = None, node: str = NODE, ring: KeyRing = RING) -> Pod:
    claim = GrantClaim(
        uid if uid is not None else pod.uid,
        node,
        ASSIGNED_TIME,
        pod.annotations[NVIDIA.allocated_annotation],
    )
    return replace(pod, annotations={**pod.annotations, SIGNATURE: ring.sign(claim)})


# forged grants ---------------------------------------------------------------------------------
def test_a_grant_without_a_signature_is_refused(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(FULL_A, name="intruder", ring=None, bind_time=0))

    message = str(refused(w, "intruder", "no vgpu.io/grant-signature"))
    assert "no pod on node gpu-node-1 waits with a grant this plugin can trust" in message


def test_a_grant_signed_with_another_key_is_refused(tmp_path: Path) -> None:
    w = world(tmp_path)
    stranger = KeyRing({"2026-01": b"z" * 32})
    w.put(scheduled_pod(FULL_A, name="intruder", ring=stranger))

    refused(w, "intruder", "does not verify")


def test_a_signature_copied_from_another_pod_is_refused(tmp_path: Path) -> None:
    w = world(tmp_path)
    real = scheduled_pod(FULL_A, name="real", bind_time=5, **{"hami.io/bind-phase": "success"})
    w.put(real, lock=False)
    copy = scheduled_pod(
        FULL_A, name="intruder", ring=None, **{SIGNATURE: real.annotations[SIGNATURE]}
    )
    w.put(copy, lock=False)

    refused(w, "intruder", "does not verify")


def test_a_signature_for_another_pod_uid_or_node_is_refused(tmp_path: Path) -> None:
    w = world(tmp_path)
    pod = scheduled_pod(FULL_A, name="moved")
    w.put(signed_for(pod, node="gpu-node-2"))

    refused(w, "moved", "does not verify")

    w2 = world(tmp_path / "2")
    w2.put(signed_for(pod, uid="uid-of-a-deleted-pod"))
    refused(w2, "moved", "does not verify")


def test_to_allocate_raised_above_the_signed_grant_is_refused(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(FULL_A, allocated=f"{UUID_A},NVIDIA,3000,30:;"))

    err = refused(w, "train", "container 'main'")
    assert f"asks for {UUID_A} 32768 MiB 100% cores" in str(err)
    assert f"grants {UUID_A} 3000 MiB 30% cores" in str(err)


def test_to_allocate_naming_another_card_or_an_extra_container_is_refused(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(f"{UUID_B},NVIDIA,3000,30:;", allocated=f"{UUID_A},NVIDIA,3000,30:;"))
    refused(w, "train", f"asks for {UUID_B}")

    w2 = world(tmp_path / "2")
    w2.put(
        scheduled_pod(
            f"{UUID_A},NVIDIA,3000,30:;{UUID_B},NVIDIA,3000,30:;",
            allocated=f"{UUID_A},NVIDIA,3000,30:;",
        )
    )
    refused(w2, "train", "container #1.*grants nothing")


def test_a_container_granted_the_same_card_twice_is_refused(tmp_path: Path) -> None:
    w = world(tmp_path)
    twice = f"{UUID_A},NVIDIA,1000,0:{UUID_A},NVIDIA,1000,0:;"
    w.put(scheduled_pod(twice, Container("main", limits={"nvidia.com/gpu": 2})))

    with pytest.raises(DevicePluginError, match=f"card id '{UUID_A}' is already listed as container #0, card #0"):
        w.allocator.allocate([[f"{UUID_A}-0", f"{UUID_A}-1"]])
    assert w.pod().annotations["hami.io/bind-phase"] == "failed"


def test_a_forger_with_bind_time_zero_is_not_picked_before_a_real_waiting_pod(
    tmp_path: Path,
) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,3000,30:;", name="real", bind_time=100), lock=False)
    w.put(scheduled_pod(FULL_A, name="intruder", ring=None, bind_time=0), lock=False)

    (answer,) = w.allocator.allocate([[f"{UUID_A}-0"]])

    assert answer.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m"
    assert w.pod("real").annotations["hami.io/bind-phase"] == "success"
    assert w.pod("intruder").annotations["hami.io/bind-phase"] == "failed"
    assert [e[1:3] for e in w.cluster.events] == [("intruder", "GPUAllocationFailed")]


def test_a_forged_pod_on_another_node_is_never_touched(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(FULL_A, name="elsewhere", node="gpu-node-2", ring=None), lock=False)

    with pytest.raises(DevicePluginError, match="no pod on node gpu-node-1 is waiting"):
        w.allocator.allocate([[f"{UUID_A}-0"]])
    assert w.pod("elsewhere").annotations["hami.io/bind-phase"] == "allocating"
    assert w.cluster.events == []


def test_without_a_readable_key_ring_nothing_is_served_and_no_pod_is_failed(
    tmp_path: Path,
) -> None:
    w = world(tmp_path)
    w.keys.ring = None
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,3000,30:;"))

    with pytest.raises(DevicePluginError, match=r"cannot verify grants.*holds no grant keys"):
        w.allocator.allocate([[f"{UUID_A}-0"]])
    assert w.pod().annotations["hami.io/bind-phase"] == "allocating"
    assert w.cluster.events == []


# the node ledger ------------------------------------------------------------------------------
def test_a_valid_grant_is_refused_when_pods_already_bound_here_fill_the_card(
    tmp_path: Path,
) -> None:
    w = world(tmp_path)
    running = scheduled_pod(
        f"{UUID_A},NVIDIA,20000,50:;", name="running", **{"hami.io/bind-phase": "success"}
    )
    w.put(running, lock=False)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,20000,30:;", name="second"))

    err = refused(w, "second", f"card {UUID_A} would be over capacity on node gpu-node-1")
    assert "container 'main'" in str(err)
    assert "this pod needs 1 slices, 20000 MiB, 30% cores" in str(err)
    assert "other pods here hold 1 slices, 20000 MiB, 50% cores" in str(err)


def test_the_ledger_counts_slices_against_the_split_count(tmp_path: Path) -> None:
    w = world(tmp_path, split_count=2)
    for name in ("one", "two"):
        done = scheduled_pod(
            f"{UUID_A},NVIDIA,100,0:;", name=name, **{"hami.io/bind-phase": "success"}
        )
        w.put(done, lock=False)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,100,0:;", name="third"))

    refused(w, "third", "this pod needs 1 slices.*other pods here hold 2 slices")


def test_finished_refused_forged_and_elsewhere_pods_do_not_fill_the_ledger(tmp_path: Path) -> None:
    w = world(tmp_path)
    success = {"hami.io/bind-phase": "success"}
    w.put(replace(scheduled_pod(FULL_A, name="finished", **success), phase="Succeeded"), lock=False)
    w.put(scheduled_pod(FULL_A, name="refused", **{"hami.io/bind-phase": "failed"}), lock=False)
    w.put(scheduled_pod(FULL_A, name="forged", ring=None, **success), lock=False)
    w.put(scheduled_pod(FULL_A, name="elsewhere", node="gpu-node-2", **success), lock=False)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,20000,30:;", name="real"))

    (answer,) = w.allocator.allocate([[f"{UUID_A}-0"]])

    assert answer.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "20000m"


def test_init_containers_count_at_their_peak_not_their_sum(tmp_path: Path) -> None:
    w = world(tmp_path)
    pipeline = scheduled_pod(
        f"{UUID_A},NVIDIA,16000,0:;{UUID_A},NVIDIA,16000,0:;",
        Container("setup", is_init=True, limits={"nvidia.com/gpu": 1}),
        Container("main", limits={"nvidia.com/gpu": 1}),
        name="pipeline",
        **{"hami.io/bind-phase": "success"},
    )
    w.put(pipeline, lock=False)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,16000,0:;", name="next"))

    (answer,) = w.allocator.allocate([[f"{UUID_A}-0"]])

    assert answer.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "16000m"


# signing off ----------------------------------------------------------------------------------
def test_with_signing_off_a_pod_of_a_trusted_scheduler_bound_where_assigned_is_served(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, signing=False, trusted_schedulers=frozenset({"hami-scheduler"}))
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,3000,30:;", ring=None, scheduler="hami-scheduler"))

    (answer,) = w.allocator.allocate([[f"{UUID_A}-0"]])

    assert answer.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m"


def test_with_signing_off_another_scheduler_or_another_assigned_node_is_refused(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, signing=False, trusted_schedulers=frozenset({"hami-scheduler"}))
    w.put(scheduled_pod(FULL_A, name="direct", ring=None, scheduler="default-scheduler"))
    refused(w, "direct", "names scheduler 'default-scheduler', not one of the trusted")

    w2 = world(tmp_path / "2", signing=False, trusted_schedulers=frozenset({"hami-scheduler"}))
    moved = scheduled_pod(
        FULL_A,
        name="moved",
        ring=None,
        scheduler="hami-scheduler",
        **{"hami.io/vgpu-node": "gpu-node-2"},
    )
    w2.put(moved)
    refused(w2, "moved", "hami.io/vgpu-node names 'gpu-node-2'")


def test_with_signing_off_the_ledger_still_refuses_an_overfull_card(tmp_path: Path) -> None:
    w = world(tmp_path, signing=False, trusted_schedulers=frozenset({"hami-scheduler"}))
    running = scheduled_pod(
        f"{UUID_A},NVIDIA,20000,0:;",
        name="running",
        ring=None,
        scheduler="hami-scheduler",
        **{"hami.io/bind-phase": "success"},
    )
    w.put(running, lock=False)
    w.put(scheduled_pod(FULL_A, name="second", ring=None, scheduler="hami-scheduler"))

    refused(w, "second", "would be over capacity")


# key rotation ---------------------------------------------------------------------------------
def test_a_grant_signed_with_a_newly_rotated_key_is_served(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,1000,0:;", name="before"))
    w.allocator.allocate([[f"{UUID_A}-0"]])  # the plugin has read the ring with one key

    rotated = KeyRing({**RING.keys, "2026-02": b"b" * 32})
    w.keys.ring = rotated
    w.advance(5)  # an unknown key name makes the plugin read the ring again, at most every 5 s
    w.put(scheduled_pod(f"{UUID_B},NVIDIA,1000,0:;", name="after", ring=rotated))

    (answer,) = w.allocator.allocate([[f"{UUID_B}-0"]])

    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == UUID_B
    assert w.pod("after").annotations[SIGNATURE].startswith("2026-02:")
