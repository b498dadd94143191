"""The preconditioned patch both the scheduler and the device plugin write through: a retry
after a 409 only on the same pod with what the caller depends on unchanged, at most once, and
an ambiguous failure read back only where the caller settles it."""

from tests.unit.scheduler.test_ambiguous_writes import PatchCommitsThenTimesOut
from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.app.preconditioned_patch import Outcome, patch_preconditioned
from vgpu.domain.pod import Pod


def anything_goes(before: Pod, current: Pod) -> bool:
    return True


def stale_read() -> tuple[FakeCluster, Pod]:
    """A pod read at one version, then changed by someone else (a status update)."""
    cluster = FakeCluster()
    read = cluster.put_pod(Pod("default", "p", uid="u1"))
    cluster.put_pod(read)
    return cluster, read


def test_a_pod_recreated_under_the_same_name_is_not_written() -> None:
    cluster, read = stale_read()
    cluster.delete_pod("default", "p")
    cluster.put_pod(Pod("default", "p", uid="u2"))

    written = patch_preconditioned(cluster, read, {"a": "1"}, unchanged=anything_goes)

    assert written.outcome is Outcome.REFUSED and "resourceVersion" in written.detail
    current = cluster.get_pod("default", "p")
    assert current is not None and "a" not in current.annotations


class AlwaysMoving(FakeCluster):
    """Someone writes the pod right after each read: every patch meets a newer version."""

    def read_pod(self, namespace: str, name: str) -> Pod | None:
        current = super().read_pod(namespace, name)
        if current is not None:
            self.put_pod(current)
        return current


def test_a_conflict_is_retried_once_only() -> None:
    cluster = AlwaysMoving()
    read = cluster.put_pod(Pod("default", "p", uid="u1"))
    cluster.put_pod(read)
    seen: list[str] = []

    def unchanged(before: Pod, current: Pod) -> bool:
        seen.append(current.resource_version)
        return True

    written = patch_preconditioned(cluster, read, {"a": "1"}, unchanged=unchanged)

    assert written.outcome is Outcome.REFUSED
    assert len(seen) == 1  # asked after the first 409 only: no third attempt


class TimesOut(PatchCommitsThenTimesOut):
    """The patch is applied but its answer is lost; live reads are counted."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def read_pod(self, namespace: str, name: str) -> Pod | None:
        self.reads += 1
        return super().read_pod(namespace, name)


def test_an_ambiguous_failure_is_read_back_only_when_the_caller_settles_it() -> None:
    cluster = TimesOut()
    read = cluster.put_pod(Pod("default", "p", uid="u1"))

    settled = patch_preconditioned(cluster, read, {"a": "1"}, unchanged=anything_goes)
    assert settled.outcome is Outcome.WRITTEN and cluster.reads == 1

    current = cluster.get_pod("default", "p")
    assert current is not None
    unsettled = patch_preconditioned(
        cluster, current, {"a": "2"}, unchanged=anything_goes, settle=False
    )
    assert unsettled.outcome is Outcome.UNKNOWN and "gateway timeout" in unsettled.detail
    assert cluster.reads == 1
