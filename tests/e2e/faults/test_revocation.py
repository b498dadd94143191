"""Issue 8 item 7: a reservation revoked after a failed bind stays revoked, everywhere.

A leader and a standby (leader election), each behind its own proxy. The leader places pod
`a`, its Binding is refused (500), so the leader gives `a`'s card back and places `b` there.
The standby must count the same when it takes over, and so must the old leader after a restart
when it leads again: the revocation has to be written to the API, not only remembered in one
process. (Only the leader publishes its ledger, so each replica is looked at while it leads.)
"""

from tests.e2e.faults.cluster import FaultCluster, Replica
from tests.e2e.faults.invariants import Ledger, check_capacity, ledger_from_metrics, read_cluster
from tests.e2e.faults.proxy import Action, Rule
from tests.e2e.scheduler.harness import wait_until


def ledger(replica: Replica) -> Ledger:
    return ledger_from_metrics(replica.process.metrics_text())


def test_a_revoked_reservation_does_not_come_back_on_the_standby_or_after_a_restart(
    faults: FaultCluster,
) -> None:
    faults.add_node("n1", cards=1, memory=10000)
    first = faults.replica("replica-a", election=True, ready=False)
    second = faults.replica("replica-b", election=True, ready=False)
    leader = faults.leader(first, second)
    standby = second if leader is first else first
    a = faults.create_pod("a", 6000)
    b = faults.create_pod("b", 6000)
    reply = leader.process.try_filter(a, ["n1"])
    assert reply is not None and reply["NodeNames"] == ["n1"], reply
    leader.proxy.add(Rule(Action.RESPOND, "POST", r"/pods/a/binding$", times=1, status=500))
    assert leader.process.try_bind(a, "n1") not in ("", None)
    faults.release_lock("n1")  # in case the failed bind left it
    reply = leader.process.try_filter(b, ["n1"])
    assert reply is not None and reply["NodeNames"] == ["n1"], reply
    assert leader.process.try_bind(b, "n1") == ""
    before = ledger(leader)
    assert [u.memory for u in before.values()] == [6000]  # only b holds the card

    # only the leader publishes its ledger: hand leadership over to see each replica's
    broken = []
    leader.process.stop()
    assert wait_until(standby.process.is_ready, 30), faults.logs()
    if not wait_until(lambda: ledger(standby) == before, 10):
        broken.append(f"the standby, now leading, counts {ledger(standby)}; before {before}")
    leader.process.start(ready=False)  # restarted: it rebuilds from the API as a standby
    assert wait_until(leader.process.synced, 30), faults.logs()
    standby.process.stop()
    assert wait_until(leader.process.is_ready, 30), faults.logs()
    if ledger(leader) != before:
        broken.append(
            f"the restarted replica, now leading, counts {ledger(leader)}; before {before}"
        )
    broken += [str(v) for v in check_capacity(*read_cluster(faults.api))]
    assert not broken, "\n".join(broken)
