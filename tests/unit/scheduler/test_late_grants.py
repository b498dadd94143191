"""A grant that lands after its card was given away is not counted and is revoked; a bind
re-checks that its reservation still fits (issue 17, item 4)."""

from typing import Any

from tests.unit.scheduler.builders import (
    ALLOCATED,
    CARD,
    fits,
    hami_pod,
    manifest,
    one_card,
    placed_and_running,
    signed,
)

GRANT_KEYS = ("hami.io/vgpu-node", "hami.io/vgpu-time", ALLOCATED, "vgpu.io/grant-signature")


def late_grant(name: str, memory: int, at: int = 1_749_999_990) -> dict[str, Any]:
    """A pending pod carrying a grant a (deposed) leader signed for CARD."""
    body = manifest(
        name,
        annotations={
            "hami.io/vgpu-node": "node1",
            "hami.io/vgpu-time": str(at),
            ALLOCATED: f"{CARD},NVIDIA,{memory},0:;",
        },
        gpu=1,
        gpumem=memory,
    )
    return signed(body)


def test_a_late_grant_is_not_counted_its_bind_fails_and_the_leader_revokes_it() -> None:
    w = one_card()
    placed_and_running(w, "y", 6000)
    w.add_pod(late_grant("x", 6000))

    assert w.usage("node1", CARD).memory == 6000
    assert "has no GPU reservation on node1" in w.service.bind("default", "x", "uid-x", "node1")
    assert w.late_grants.settle() == 1
    assert not set(GRANT_KEYS) & w.pod_annotations("x").keys()
    revoked = [e for e in w.cluster.events if e[1] == "x" and e[2] == "GrantRevoked"]
    assert len(revoked) == 1 and "written after the card had been given" in revoked[0][3]
    assert w.usage("node1", CARD).memory == 6000


def test_a_standby_counts_the_same_and_leaves_the_revocation_to_the_leader() -> None:
    w = one_card()
    w.leader[0] = False
    placed = late_grant("y", 6000, at=1_749_999_000)
    w.add_pod(placed)
    w.add_pod(late_grant("x", 6000))

    assert w.usage("node1", CARD).memory == 6000  # the earlier grant keeps the card
    assert w.state.ledger.allocation("default/y") is not None
    assert w.late_grants.settle() == 0
    assert ALLOCATED in w.pod_annotations("x")
    w.leader[0] = True  # it leads now: the revocation it queued is done
    assert w.late_grants.settle() == 1
    assert ALLOCATED not in w.pod_annotations("x")


def test_a_late_grant_that_is_bound_after_all_counts() -> None:
    w = one_card()
    placed_and_running(w, "y", 6000)
    body = late_grant("x", 6000)
    w.add_pod(body)
    body["spec"]["nodeName"] = "node1"  # another scheduler bound it: it runs, so it counts
    w.add_pod(body)
    assert w.usage("node1", CARD).memory == 12000


def test_bind_refuses_a_reservation_that_no_longer_fits_and_revokes_it() -> None:
    w = one_card()
    assert fits(w, "x", 6000)
    w.add_pod(hami_pod("h", 6000))  # a running pod shows up on the card: it always counts
    assert w.usage("node1", CARD).memory == 12000

    error = w.service.bind("default", "x", "uid-x", "node1")

    assert "no longer fits beside the other pods' grants" in error
    assert "over capacity" in error
    assert not set(GRANT_KEYS) & w.pod_annotations("x").keys()
    assert w.cluster.bindings == []
    node = w.cluster.get_node("node1")
    assert node is not None and "hami.io/mutex.lock" not in node.annotations
    assert w.usage("node1", CARD).memory == 6000


def test_bind_refuses_a_pod_whose_annotations_lost_the_reserved_grant() -> None:
    w = one_card()
    assert fits(w, "x", 6000)
    pod = w.cluster.get_pod("default", "x")
    assert pod is not None
    w.state.reserve("default/x", "node1", 0.0, "node1|0|another grant|", own=True)
    error = w.service.bind("default", "x", "uid-x", "node1")
    assert "do not carry the grant reserved for it" in error
    assert w.cluster.bindings == []
