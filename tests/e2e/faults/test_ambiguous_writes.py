"""Issue 8 items 5 and 6: writes whose outcome the scheduler cannot see must not over-commit.

Item 5: the Binding reaches the API and commits, but its answer is lost (the proxy forwards the
POST, then cuts the connection). The scheduler must find out what happened before it gives the
card to anyone else.

Item 6: a filter's annotation PATCH is delayed past kube-scheduler's patience; kube-scheduler
tries again, the retry places the pod elsewhere and binds it. When the stale PATCH finally
arrives it must not win: the pod's annotations must name the node it is bound to.
"""

import threading

from tests.e2e.faults.cluster import FaultCluster
from tests.e2e.faults.invariants import assert_capacity, assert_ledgers_agree
from tests.e2e.faults.proxy import Action, Rule
from tests.e2e.scheduler.harness import wait_until


def test_a_binding_that_commits_but_loses_its_answer_does_not_free_the_card(
    faults: FaultCluster,
) -> None:
    faults.add_node("n1", cards=1, memory=10000)
    leader = faults.replica("leader")
    first = faults.create_pod("first", 6000)
    reply = leader.process.try_filter(first, ["n1"])
    assert reply is not None and reply["NodeNames"] == ["n1"], reply
    leader.proxy.add(Rule(Action.CUT_AFTER, "POST", r"/pods/first/binding$", times=1))

    leader.process.try_bind(first, "n1")  # whatever it answers, the Binding has committed

    assert faults.pod("first")["spec"].get("nodeName") == "n1"
    second = faults.create_pod("second", 6000)
    reply = leader.process.try_filter(second, ["n1"])
    if reply is not None and reply.get("NodeNames") == ["n1"]:
        leader.process.try_bind(second, "n1")
    assert_capacity(faults.api)
    assert_ledgers_agree(faults.api, faults.scrapes(leader))


def test_a_superseded_filters_late_patch_does_not_win(faults: FaultCluster) -> None:
    faults.add_node("n1", cards=1, memory=10000)
    faults.add_node("n2", cards=1, memory=10000)
    leader = faults.replica("leader")
    pod = faults.create_pod("p", 4000)
    late = leader.proxy.add(Rule(Action.DELAY, "PATCH", r"/pods/p$", times=1, seconds=3.0))

    # kube-scheduler's first try: it gives up on the answer after a second
    first_try = threading.Thread(target=leader.process.try_filter, args=(pod, ["n1"], 1.0))
    first_try.start()
    assert wait_until(lambda: late.hits == 1, 10)
    first_try.join(10)
    # its retry, with n1 no longer a candidate, places and binds on n2
    reply = leader.process.try_filter(pod, ["n2"], timeout=30)
    assert reply is not None and reply["NodeNames"] == ["n2"], reply
    assert leader.process.try_bind(pod, "n2", timeout=30) == ""
    # the delayed PATCH has been sent on by now: wait until the API has answered it
    assert wait_until(lambda: leader.proxy.finished(Action.DELAY, r"/pods/p$") == 1, 10)

    stored = faults.pod("p")
    assert stored["spec"]["nodeName"] == "n2"
    assert stored["metadata"]["annotations"]["hami.io/vgpu-node"] == "n2"
    assert stored["metadata"]["labels"].get("hami.io/vgpu-node") == "n2"
    assert_capacity(faults.api)
    assert_ledgers_agree(faults.api, faults.scrapes(leader))
