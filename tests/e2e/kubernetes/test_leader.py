"""Leader election with a coordination.k8s.io/v1 Lease between two candidates over real HTTP."""

from collections.abc import Iterator

import pytest
from kubernetes.client import ApiClient

from tests.e2e.k8s_emulator import RunningApiServer
from tests.e2e.kubernetes.conftest import wait_until
from vgpu.adapters.kubernetes import ConnectionSettings, LeaderElector, new_api_client
from vgpu.adapters.kubernetes.leader import Attempt

LEASE = "/apis/coordination.k8s.io/v1/namespaces/vgpu/leases/vgpu-scheduler"


@pytest.fixture()
def client(k8s_api: RunningApiServer) -> Iterator[ApiClient]:
    api_client = new_api_client(ConnectionSettings(host=k8s_api.url))
    yield api_client
    api_client.close()  # type: ignore[no-untyped-call]


class Candidate:
    """An elector plus the callbacks it made, in order."""

    def __init__(self, client: ApiClient, identity: str, lease_duration_s: int = 15) -> None:
        self.calls: list[str] = []
        self.elector = LeaderElector(
            client,
            identity=identity,
            name="vgpu-scheduler",
            namespace="vgpu",
            lease_duration_s=lease_duration_s,
            renew_deadline_s=min(10.0, lease_duration_s * 0.6),
            retry_period_s=0.05,
            on_started_leading=lambda: self.calls.append("started"),
            on_stopped_leading=lambda: self.calls.append("stopped"),
        )


@pytest.fixture()
def candidates(client: ApiClient) -> Iterator[list[Candidate]]:
    made: list[Candidate] = []
    yield made
    for candidate in made:
        candidate.elector.stop()


def test_exactly_one_of_two_candidates_leads_and_the_other_takes_over_on_release(
    k8s_api: RunningApiServer, client: ApiClient, candidates: list[Candidate]
) -> None:
    a, b = Candidate(client, "replica-a"), Candidate(client, "replica-b")
    candidates.extend([a, b])
    a.elector.start()
    b.elector.start()

    assert wait_until(lambda: a.elector.is_leader or b.elector.is_leader)
    leader, follower = (a, b) if a.elector.is_leader else (b, a)
    renewals = len(k8s_api.requests("PUT", LEASE))
    assert wait_until(lambda: len(k8s_api.requests("PUT", LEASE)) >= renewals + 3)  # renewing
    assert leader.elector.is_leader and not follower.elector.is_leader
    lease = k8s_api.get(LEASE)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == leader.elector.identity
    assert lease["spec"]["leaseDurationSeconds"] == 15

    leader.elector.stop()  # releases the lease

    assert not leader.elector.is_leader
    assert leader.calls == ["started", "stopped"]
    assert wait_until(lambda: follower.elector.is_leader)
    assert follower.calls == ["started"]
    lease = k8s_api.get(LEASE)
    assert lease is not None and lease["spec"]["holderIdentity"] == follower.elector.identity
    assert lease["spec"]["leaseTransitions"] == 1


def test_a_leader_that_vanishes_without_releasing_is_replaced_after_the_lease_expires(
    k8s_api: RunningApiServer, client: ApiClient, candidates: list[Candidate]
) -> None:
    a = Candidate(client, "replica-a", lease_duration_s=1)
    candidates.append(a)
    a.elector.start()
    assert a.elector.wait_for_leadership(10)
    b = Candidate(client, "replica-b", lease_duration_s=1)
    candidates.append(b)
    assert b.elector.try_acquire_or_renew() is Attempt.FOLLOWING  # held by a live leader

    a.elector.stop(release=False)  # as if the process died
    b.elector.start()

    assert b.elector.wait_for_leadership(10)
    assert b.calls == ["started"]
    lease = k8s_api.get(LEASE)
    assert lease is not None and lease["spec"]["holderIdentity"] == "replica-b"


def test_a_leader_that_cannot_renew_steps_down(
    k8s_api: RunningApiServer, client: ApiClient, candidates: list[Candidate]
) -> None:
    a = Candidate(client, "replica-a", lease_duration_s=1)
    candidates.append(a)
    a.elector.start()
    assert a.elector.wait_for_leadership(10)

    k8s_api.emulator[f"put {LEASE}"] << 500  # every renewal fails from now on

    assert wait_until(lambda: not a.elector.is_leader)  # at the renew deadline ...
    assert wait_until(lambda: a.calls == ["started", "stopped"])  # ... then the thread notices
