"""The node lock's decisions and its retry on 409 Conflict, without a server."""

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from vgpu.adapters.kubernetes.nodelock import LockVerdict, NodeLocker, judge_lock
from vgpu.ports.cluster import Conflict, NotFound

NOW = datetime(2026, 8, 21, 6, 20, 39, tzinfo=UTC)
EXPIRY = timedelta(minutes=5)
LOCK = "hami.io/mutex.lock"


def _alive(*pods: str) -> Any:
    asked: list[str] = []

    def exists(namespace: str, pod: str) -> bool:
        asked.append(f"{namespace}/{pod}")
        return f"{namespace}/{pod}" in pods

    exists.asked = asked  # type: ignore[attr-defined]
    return exists


@pytest.mark.parametrize(
    ("value", "alive", "verdict"),
    [
        (None, (), LockVerdict.FREE),
        ("2026-08-21T06:20:00Z,ns,me", (), LockVerdict.OURS),
        ("2026-08-21T06:20:00Z,ns,other", ("ns/other",), LockVerdict.HELD),
        ("2026-08-21T14:20:00+08:00,ns,other", ("ns/other",), LockVerdict.HELD),
        ("2026-08-21T06:20:00Z,ns,other", (), LockVerdict.ORPHANED),
        ("2026-08-21T06:10:00Z,ns,other", ("ns/other",), LockVerdict.EXPIRED),
        ("2026-08-21T06:20:00Z", (), LockVerdict.HELD),  # legacy bare time: no owner to ask about
        ("yesterday,ns,other", ("ns/other",), LockVerdict.MALFORMED),
        ("2026-08-21T06:21:39Z,ns,other", ("ns/other",), LockVerdict.HELD),  # 60 s ahead: skew
        ("2026-08-21T06:21:40Z,ns,other", ("ns/other",), LockVerdict.FUTURE),  # 61 s ahead
        ("2099-01-01T00:00:00Z", (), LockVerdict.FUTURE),  # would block the node for decades
    ],
)
def test_who_may_take_the_lock(value: str | None, alive: tuple[str, ...], verdict: LockVerdict) -> None:
    assert judge_lock(value, "ns", "me", NOW, EXPIRY, _alive(*alive)).verdict is verdict
    assert verdict.may_take is (verdict is not LockVerdict.HELD)


def test_the_owner_is_looked_up_only_for_an_unexpired_foreign_lock() -> None:
    exists = _alive("ns/other")
    judge_lock("2026-08-21T06:00:00Z,ns,other", "ns", "me", NOW, EXPIRY, exists)
    judge_lock("2026-08-21T06:20:00Z,ns,me", "ns", "me", NOW, EXPIRY, exists)
    assert exists.asked == []


class FakeApi:
    """Answers node GETs from a dict and fails the first `conflicts` patches with 409."""

    def __init__(self, annotations: dict[str, str], conflicts: int = 0) -> None:
        self.node: dict[str, Any] = {
            "metadata": {"name": "gpu-1", "resourceVersion": "7", "annotations": annotations}
        }
        self.conflicts = conflicts
        self.patches: list[dict[str, Any]] = []
        self.pods = {"/api/v1/namespaces/ns/pods/other"}

    def get(self, path: str, query: object = ()) -> dict[str, Any]:
        if path == "/api/v1/nodes/gpu-1":
            return self.node
        if path in self.pods:
            return {}
        raise NotFound(f"GET {path}: HTTP 404")

    def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.patches.append(body)
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict(f"PATCH {path}: HTTP 409")
        annotations = dict(self.node["metadata"]["annotations"])
        for key, value in body["metadata"]["annotations"].items():
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        self.node = {"metadata": {**self.node["metadata"], "annotations": annotations}}
        return self.node


class FakeTime:
    """A monotonic clock that only `sleep` moves; `at_sleep[n]` runs before the n-th sleep."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.at_sleep: dict[int, Callable[[], None]] = {}

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.at_sleep.pop(len(self.sleeps), lambda: None)()
        self.sleeps.append(seconds)
        self.now += seconds


def _locker(api: FakeApi, sleeps: list[float], wait_s: float = 0.0) -> NodeLocker:
    time = FakeTime()
    time.sleeps = sleeps
    return _timed_locker(api, time, wait_s)


def _timed_locker(api: FakeApi, time: FakeTime, wait_s: float) -> NodeLocker:
    return NodeLocker(
        api,  # type: ignore[arg-type]
        clock=lambda: NOW,
        sleep=time.sleep,
        conflict_wait_s=wait_s,
        monotonic=time.monotonic,
    )


def test_a_conflict_is_retried_after_a_growing_pause_and_the_patch_carries_the_version() -> None:
    api, sleeps = FakeApi({}, conflicts=2), list[float]()
    _locker(api, sleeps).lock("gpu-1", "ns", "me", EXPIRY)

    assert api.node["metadata"]["annotations"][LOCK] == "2026-08-21T06:20:39Z,ns,me"
    assert [p["metadata"]["resourceVersion"] for p in api.patches] == ["7", "7", "7"]
    assert len(sleeps) == 2 and 0.1 <= sleeps[0] < sleeps[1] <= 0.2 * 1.2


def test_five_conflicts_in_a_row_give_up_with_conflict() -> None:
    api, sleeps = FakeApi({}, conflicts=5), list[float]()
    with pytest.raises(Conflict, match="after 5 tries"):
        _locker(api, sleeps).lock("gpu-1", "ns", "me", EXPIRY)
    assert len(api.patches) == 5 and len(sleeps) == 4


def test_a_live_holder_is_named_and_nothing_is_written() -> None:
    api, sleeps = FakeApi({LOCK: "2026-08-21T06:20:00Z,ns,other"}), list[float]()
    with pytest.raises(Conflict, match="locked by pod ns/other"):
        _locker(api, sleeps).lock("gpu-1", "ns", "me", EXPIRY)
    assert api.patches == [] and sleeps == []  # no wait configured: refused at once


def test_a_live_holder_is_waited_for_with_growing_pauses_up_to_the_bound() -> None:
    api, time = FakeApi({LOCK: "2026-08-21T06:20:00Z,ns,other"}), FakeTime()
    with pytest.raises(Conflict, match=r"locked by pod ns/other .*\(waited 5s\)"):
        _timed_locker(api, time, wait_s=5.0).lock("gpu-1", "ns", "me", EXPIRY)

    assert api.patches == []
    assert time.now == pytest.approx(5.0)  # waited the whole bound, not a moment longer
    first = time.sleeps[:4]
    assert all(b <= s <= b * 1.2 for s, b in zip(first, (0.1, 0.2, 0.4, 0.8), strict=True))
    assert all(s <= 1.0 for s in time.sleeps)  # capped at 1 s


def test_a_lock_released_while_waiting_is_taken() -> None:
    api, time = FakeApi({LOCK: "2026-08-21T06:20:00Z,ns,other"}), FakeTime()
    time.at_sleep[2] = lambda: api.node["metadata"]["annotations"].pop(LOCK)

    _timed_locker(api, time, wait_s=5.0).lock("gpu-1", "ns", "me", EXPIRY)

    assert api.node["metadata"]["annotations"][LOCK] == "2026-08-21T06:20:39Z,ns,me"
    assert len(time.sleeps) == 3 and len(api.patches) == 1


def test_a_lock_dated_beyond_the_clock_skew_is_taken_over_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = FakeApi({LOCK: "2099-01-01T00:00:00Z,ns,other"})
    with caplog.at_level(logging.INFO, logger="vgpu.adapters.kubernetes.nodelock"):
        _locker(api, []).lock("gpu-1", "ns", "me", EXPIRY)

    assert api.node["metadata"]["annotations"][LOCK] == "2026-08-21T06:20:39Z,ns,me"
    assert "replacing future-dated lock '2099-01-01T00:00:00Z,ns,other'" in caplog.text


def test_a_negative_wait_is_refused() -> None:
    with pytest.raises(ValueError, match="conflict_wait_s must not be negative, got -1"):
        _locker(FakeApi({}), [], wait_s=-1)


def test_release_removes_only_our_own_lock() -> None:
    api = FakeApi({LOCK: "2026-08-21T06:20:00Z,ns,other"})
    assert _locker(api, []).release("gpu-1", "ns", "me") is None
    assert api.patches == []
    _locker(api, []).release("gpu-1", "ns", "other")
    assert api.patches[0]["metadata"]["annotations"] == {LOCK: None}
    assert LOCK not in api.node["metadata"]["annotations"]
    assert _locker(api, []).release("gpu-9", "ns", "other") is None  # node gone: harmless


def test_release_removes_a_legacy_lock_that_names_no_pod() -> None:
    api = FakeApi({LOCK: "2026-08-21T06:20:00Z"})
    _locker(api, []).release("gpu-1", "ns", "me")
    assert LOCK not in api.node["metadata"]["annotations"]


def test_release_removes_the_pods_own_lock_even_when_its_time_is_unreadable() -> None:
    # HAMi matches the owner part alone; a lock it cannot read would block its schedulers
    api = FakeApi({LOCK: "lock-values,ns,me"})
    _locker(api, []).release("gpu-1", "ns", "other")
    assert api.patches == []
    _locker(api, []).release("gpu-1", "ns", "me")
    assert LOCK not in api.node["metadata"]["annotations"]


def test_the_lock_patch_also_carries_what_the_caller_adds_from_the_same_read() -> None:
    api = FakeApi({"vgpu.io/occupancy": "old"}, conflicts=1)
    seen: list[str] = []

    def also(annotations: Any) -> dict[str, str | None]:
        seen.append(annotations["vgpu.io/occupancy"])
        return {"vgpu.io/occupancy": "new"}

    _locker(api, []).lock("gpu-1", "ns", "me", EXPIRY, also)

    assert seen == ["old", "old"]  # computed again for the retry after the conflict
    assert api.patches[-1]["metadata"]["annotations"] == {
        "vgpu.io/occupancy": "new",
        LOCK: "2026-08-21T06:20:39Z,ns,me",
    }


def test_a_lock_already_ours_still_writes_what_the_caller_adds() -> None:
    api = FakeApi({LOCK: "2026-08-21T06:20:00Z,ns,me"})
    _locker(api, []).lock("gpu-1", "ns", "me", EXPIRY, lambda _: {"vgpu.io/occupancy": "x"})
    assert api.patches == [
        {"metadata": {"resourceVersion": "7", "annotations": {"vgpu.io/occupancy": "x"}}}
    ]
    _locker(api, []).lock("gpu-1", "ns", "me", EXPIRY, lambda _: {})
    assert len(api.patches) == 1  # nothing to add: nothing written


def test_nothing_is_added_while_another_pod_holds_the_lock() -> None:
    api = FakeApi({LOCK: "2026-08-21T06:20:00Z,ns,other"})
    asked: list[object] = []
    with pytest.raises(Conflict):
        _locker(api, []).lock("gpu-1", "ns", "me", EXPIRY, lambda a: asked.append(a) or {})
    assert asked == [] and api.patches == []
