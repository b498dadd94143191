"""A reservation whose pod is never bound is released after the timeout, and stays released."""

from tests.unit.scheduler.builders import A40_UUIDS, a40_node, manifest, signed, world
from vgpu.domain import Usage

GRANT_KEYS = {
    "hami.io/vgpu-node",
    "hami.io/vgpu-time",
    "hami.io/vgpu-devices-to-allocate",
    "hami.io/vgpu-devices-allocated",
    "vgpu.io/grant-signature",
}


def test_an_unbound_reservation_is_released_after_the_timeout() -> None:
    w = world(a40_node("node1"), reservation_timeout=60)
    w.filter(manifest("p", gpu=2, gpumem=46068), "node1")
    w.clock.now += 59
    assert w.runtime.sweep_now() == 0
    w.clock.now += 2
    assert w.runtime.sweep_now() == 1
    assert all(w.usage("node1", u) == Usage() for u in A40_UUIDS)
    assert w.state.quota.used("default") == Usage()


def test_late_events_with_the_same_annotations_do_not_bring_it_back() -> None:
    w = world(a40_node("node1"), reservation_timeout=60)
    w.filter(manifest("p", gpu=1, gpumem=46068), "node1")
    w.clock.now += 61
    w.runtime.sweep_now()
    w.cluster.patch_pod_annotations("default", "p", {"unrelated": "change"})
    assert w.state.ledger.pods() == []
    # but scheduling it again reserves anew
    assert w.filter(manifest("p", gpu=1, gpumem=46068), "node1").node_names == ["node1"]
    assert len(w.state.ledger.pods()) == 1


def test_expiry_takes_the_grant_off_the_pod_so_a_late_bind_holds_nothing() -> None:
    w = world(a40_node("node1"), reservation_timeout=60)
    w.filter(manifest("p", gpu=1, gpumem=46068), "node1")
    w.clock.now += 61
    w.runtime.sweep_now()
    notes = w.pod_annotations("p")
    assert not GRANT_KEYS & notes.keys()
    pod = w.cluster.get_pod("default", "p")
    assert pod is not None and "hami.io/vgpu-node" not in pod.labels
    w.cluster.bind("default", "p", "uid-p", "node1")
    assert w.state.ledger.allocation("default/p") is None


def test_an_expired_pod_bound_before_its_grant_was_cleared_counts_again() -> None:
    w = world(a40_node("node1"), reservation_timeout=60)
    w.filter(manifest("p", gpu=1, gpumem=46068), "node1")
    w.leader[0] = False  # leadership lapses: the sweeper releases but writes nothing
    w.clock.now += 61
    w.runtime.sweep_now()
    assert w.state.ledger.allocation("default/p") is None
    assert "hami.io/vgpu-devices-allocated" in w.pod_annotations("p")
    w.cluster.bind("default", "p", "uid-p", "node1")
    assert w.state.ledger.allocation("default/p") is not None


def test_a_bound_pod_is_never_expired() -> None:
    w = world(a40_node("node1"), reservation_timeout=60)
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    assert w.service.bind("default", "p", "uid-p", "node1") == ""
    w.clock.now += 3600
    assert w.runtime.sweep_now() == 0
    assert w.state.ledger.allocation("default/p") is not None


def test_after_a_restart_old_unbound_reservations_expire_by_their_assigned_time() -> None:
    w = world(a40_node("node1"), reservation_timeout=60)
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    w.clock.now += 3600
    restarted = world(cluster=w.cluster, reservation_timeout=60)
    restarted.clock.now = w.clock.now
    assert restarted.state.ledger.allocation("default/p") is not None
    assert restarted.runtime.sweep_now() == 1
    assert restarted.state.ledger.pods() == []


def test_binding_after_expiry_fails_and_asks_for_rescheduling() -> None:
    w = world(a40_node("node1"), reservation_timeout=60)
    w.filter(manifest("p", gpu=1, gpumem=1000), "node1")
    w.clock.now += 61
    w.runtime.sweep_now()
    error = w.service.bind("default", "p", "uid-p", "node1")
    assert "no GPU reservation on node1" in error and "scheduled again" in error
    assert w.cluster.bindings == []


def test_a_pod_scheduled_again_that_no_longer_fits_does_not_get_its_old_grant_back() -> None:
    w = world(a40_node("node1"))
    body = manifest("p", gpu=1, gpumem=30000)
    w.filter(body, "node1")
    card = w.pod_annotations("p")["hami.io/vgpu-devices-allocated"].split(",")[0]
    other = next(u for u in A40_UUIDS if u != card)
    w.filter(manifest("q", gpu=1, gpumem=46068), "node1")  # takes the other card
    assert w.usage("node1", other).memory == 46068
    # a running pod the scheduler placed earlier shows up on p's card: p no longer fits there
    w.add_pod(
        signed(
            manifest(
                "r",
                node="node1",
                phase="Running",
                annotations={
                    "hami.io/vgpu-node": "node1",
                    "hami.io/vgpu-devices-allocated": f"{card},NVIDIA,20000,0:;",
                },
                gpu=1,
                gpumem=20000,
            )
        )
    )
    assert w.filter(body, "node1").node_names is None
    assert w.state.ledger.allocation("default/p") is None
    assert not GRANT_KEYS & w.pod_annotations("p").keys()  # revoked in the API too
    # kube-scheduler updates the pod's status after the failed attempt: the old grant stays gone
    w.cluster.patch_pod_annotations("default", "p", {"note": "PodScheduled=False"})
    assert w.state.ledger.allocation("default/p") is None
    assert w.usage("node1", card).memory == 20000
