"""The ledger counts only grants the cluster vouches for (issue 8, item 2)."""

import logging
from typing import Any

import pytest

from tests.unit.scheduler.builders import A40_UUIDS, KEYS, a40_node, manifest, signed, world
from vgpu.domain import Usage
from vgpu.domain.trust import GrantClaim, KeyRing

OTHER_KEYS = KeyRing({"k20260101t0000": b"another-cluster".ljust(32, b"y")})
CARD = A40_UUIDS[0]


def granted(name: str, node: str = "node1", memory: int = 46068, **kw: Any) -> dict[str, Any]:
    """A pod whose annotations grant it `memory` MiB of CARD on node1 (not signed)."""
    return manifest(
        name,
        node=node,
        phase="Running" if node else "Pending",
        annotations={
            "hami.io/vgpu-node": "node1",
            "hami.io/vgpu-time": "1750000000",
            "hami.io/vgpu-devices-allocated": f"{CARD},NVIDIA,{memory},0:;",
        },
        **kw,
    )


def test_a_grant_signed_by_the_scheduler_counts() -> None:
    w = world(a40_node("node1"))
    w.add_pod(signed(granted("real")))
    assert w.usage("node1", CARD) == Usage(1, 46068, 0)


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda body: body, id="unsigned"),
        pytest.param(lambda body: signed(body, OTHER_KEYS), id="other-key"),
        pytest.param(
            lambda body: {
                **body,
                "metadata": {
                    **body["metadata"],
                    "annotations": {
                        **body["metadata"]["annotations"],
                        "vgpu.io/grant-signature": "k20260101t0000:AAAA",
                    },
                },
            },
            id="garbage",
        ),
    ],
)
def test_unsigned_or_forged_grants_are_not_counted(forge: Any) -> None:
    w = world(a40_node("node1"))
    w.add_pod(forge(granted("forged")))
    assert w.state.ledger.pods() == []


def test_a_signature_copied_from_another_pod_does_not_verify() -> None:
    w = world(a40_node("node1"))
    real = signed(granted("real", memory=1000))
    w.add_pod(real)
    copy = granted("copy", memory=1000)
    copy["metadata"]["annotations"]["vgpu.io/grant-signature"] = real["metadata"]["annotations"][
        "vgpu.io/grant-signature"
    ]
    w.add_pod(copy)
    assert [a.pod for a in w.state.ledger.pods()] == ["default/real"]


def test_a_pending_pods_signed_grant_raised_afterwards_no_longer_verifies_and_is_released() -> (
    None
):
    w = world(a40_node("node1"))
    w.add_pod(signed(granted("p", node="", memory=1000)))
    assert w.usage("node1", CARD).memory == 1000
    w.cluster.patch_pod_annotations(
        "default", "p", {"hami.io/vgpu-devices-allocated": f"{CARD},NVIDIA,46068,0:;"}
    )
    assert w.state.ledger.pods() == []  # valid -> invalid gives the reservation back


def test_a_running_pods_grant_raised_afterwards_keeps_counting_what_was_first_counted() -> None:
    w = world(a40_node("node1"))
    w.add_pod(signed(granted("p", memory=1000)))
    w.cluster.patch_pod_annotations(
        "default", "p", {"hami.io/vgpu-devices-allocated": f"{CARD},NVIDIA,46068,0:;"}
    )
    assert w.usage("node1", CARD).memory == 1000  # neither freed nor raised


def test_a_grant_signed_for_another_node_does_not_verify_there() -> None:
    w = world(a40_node("node1"), a40_node("node2"))
    body = signed(granted("p"))
    body["metadata"]["annotations"]["hami.io/vgpu-node"] = "node2"
    body["spec"]["nodeName"] = "node2"
    w.add_pod(body)
    assert w.state.ledger.pods() == []


def test_a_pod_bound_to_another_node_than_its_grant_is_not_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = world(a40_node("node1"), a40_node("node2"))
    with caplog.at_level(logging.WARNING):
        w.add_pod(signed(granted("p", node="node2")))
        w.cluster.patch_pod_annotations("default", "p", {"unrelated": "1"})
    assert w.state.ledger.pods() == []
    # one log line for the pod, not one per event
    assert caplog.text.count("bound to node2 but its grant names node node1") == 1


def test_a_forged_grant_on_a_non_gpu_pod_does_not_block_real_pods() -> None:
    w = world(a40_node("node1"))
    w.add_pod(granted("squatter", cpu="1"))
    w.add_pod(granted("squatter2", cpu="1", node=""))
    placed = w.filter(manifest("real", gpu=1, gpumem=46068), "node1")
    assert placed.node_names == ["node1"]


def test_with_signing_off_only_pods_naming_our_scheduler_count() -> None:
    w = world(a40_node("node1"), signing={"enabled": False})
    ours = granted("ours", memory=1000)
    theirs = granted("theirs", memory=2000)
    theirs["spec"]["schedulerName"] = "default-scheduler"
    w.add_pod(ours)
    w.add_pod(theirs)
    assert [a.pod for a in w.state.ledger.pods()] == ["default/ours"]
    w.add_pod(granted("elsewhere", node="node2"))  # bound where its grant does not say
    assert [a.pod for a in w.state.ledger.pods()] == ["default/ours"]


def test_with_signing_off_the_scheduler_writes_no_signature() -> None:
    w = world(a40_node("node1"), signing={"enabled": False})
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    notes = w.pod_annotations("p")
    assert "hami.io/vgpu-devices-allocated" in notes
    assert "vgpu.io/grant-signature" not in notes


def test_the_scheduler_signs_what_it_writes_for_this_pod_node_time_and_cards() -> None:
    w = world(a40_node("node1"))
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    notes = w.pod_annotations("p")
    claim = GrantClaim(
        "uid-p", "node1", notes["hami.io/vgpu-time"], notes["hami.io/vgpu-devices-allocated"]
    )
    assert KEYS.verify(notes["vgpu.io/grant-signature"], claim)


def test_the_echo_of_its_own_grant_is_not_judged_again_but_a_changed_one_is(
    mocker: Any,
) -> None:
    """Every patch the scheduler writes comes back as a pod event; while the pod carries the
    grant byte for byte as written, there is nothing to judge (and no signature to verify)."""
    w = world(a40_node("node1"))
    judged = mocker.spy(w.follower._trust, "occupancy")
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    written = w.pod_annotations("p")
    echoes = judged.call_count
    w.cluster.patch_pod_annotations("default", "p", {"team": "a"})  # any other change
    assert judged.call_count == echoes
    assert w.usage("node1", CARD) == Usage(1, 1000, 0)
    # the same grant with another signature is judged, and the forgery is not believed
    w.cluster.patch_pod_annotations(
        "default", "p", {"vgpu.io/grant-signature": "k20260101t0000:AAAA"}
    )
    assert judged.call_count == echoes + 1
    assert w.state.ledger.pods() == []
    # written back as it was: the scheduler's own grant again, judged and believed
    w.cluster.patch_pod_annotations(
        "default", "p", {"vgpu.io/grant-signature": written["vgpu.io/grant-signature"]}
    )
    assert w.usage("node1", CARD) == Usage(1, 1000, 0)
