"""A reservation whose pod is never bound is released after the timeout, and stays released."""

from tests.unit.scheduler.builders import A40_UUIDS, a40_node, manifest, world
from vgpu.domain import Usage


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


def test_an_expired_pod_that_got_bound_anyway_counts_again() -> None:
    w = world(a40_node("node1"), reservation_timeout=60)
    w.filter(manifest("p", gpu=1, gpumem=46068), "node1")
    w.clock.now += 61
    w.runtime.sweep_now()
    w.cluster.bind("default", "p", "", "node1")
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
    w.filter(manifest("q", gpu=1, gpumem=46068), "node1")  # takes the other card
    bigger = manifest("p", gpu=2, gpumem=30000)  # the same pod, retried with a wider request
    assert w.filter(bigger, "node1").node_names is None
    # kube-scheduler updates the pod's status after the failed attempt: the old grant stays gone
    w.cluster.patch_pod_annotations("default", "p", {"note": "PodScheduled=False"})
    assert w.state.ledger.allocation("default/p") is None
    assert w.filter(manifest("r", gpu=1, gpumem=46068), "node1").node_names == ["node1"]
