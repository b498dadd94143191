"""HAMi's node handshake per scheduler version (docs/protocol.md#node-handshake) and the plugin's duty."""

from datetime import UTC, datetime, timedelta

import pytest

from vgpu.domain.handshake import (
    HANDSHAKE_ANNOTATION,
    HamiVersion,
    NodeMemory,
    check_node,
    plugin_should_report,
    reported_value,
    stamp_of,
)

V27, V28, V29, V210 = HamiVersion.V2_7, HamiVersion.V2_8, HamiVersion.V2_9, HamiVersion.V2_10
NOW = datetime(2026, 8, 21, 6, 20, 39)
FRESH = "Requesting_2026-08-21 06:20:00"  # 39 s old
STALE = "Requesting_2026-08-21 06:19:00"  # 99 s old
REQUEST_NOW = {HANDSHAKE_ANNOTATION: "Requesting_2026-08-21 06:20:39"}
DELETE_NOW = {HANDSHAKE_ANNOTATION: "Deleted_2026-08-21 06:20:39"}
REPORTED = "Reported 2024-01-23 04:30:04.434037031 +0000 UTC m=+1104711.777756895"
SEEN = NodeMemory(reported=4)


def _outcome(version: HamiVersion, value: str | None, alloc: int, memory: NodeMemory) -> tuple:
    verdict = check_node(version, value, alloc, NOW, memory)
    return verdict.healthy, verdict.refresh, verdict.patch


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (FRESH, (True, False, {})),
        (STALE, (False, False, DELETE_NOW)),  # nobody reported for a minute: dropped
        ("Requesting_2024.01.10 04:06:57", (False, False, DELETE_NOW)),  # v2.4 layout
        ("Deleted_2026-08-21 06:00:00", (True, False, {})),
        (REPORTED, (True, True, REQUEST_NOW)),
        (None, (True, True, REQUEST_NOW)),
    ],
)
def test_v2_7_lives_on_the_plugins_reported_writes(value: str | None, expected: tuple) -> None:
    assert _outcome(V27, value, 4, SEEN) == expected


@pytest.mark.parametrize(
    ("alloc", "memory", "expected", "reported"),
    [
        (4, NodeMemory(0), (True, True, {}), 4),  # first sight: read the cards
        (4, SEEN, (True, False, {}), 4),
        (8, SEEN, (True, True, {}), 8),  # more GPUs: read again
        (0, SEEN, (False, False, DELETE_NOW), 0),  # kubelet lost the plugin
        (0, NodeMemory(0), (True, False, {}), 0),
    ],
)
def test_v2_8_judges_by_allocatable_alone(
    alloc: int, memory: NodeMemory, expected: tuple, reported: int
) -> None:
    for value in (None, STALE, REPORTED):  # the handshake is not consulted at all
        verdict = check_node(V28, value, alloc, NOW, memory)
        assert (verdict.healthy, verdict.refresh, verdict.patch) == expected
        assert verdict.memory.reported == reported


@pytest.mark.parametrize(
    ("value", "alloc", "memory", "expected"),
    [
        (FRESH, 4, SEEN, (True, False, {})),
        (STALE, 4, SEEN, (True, False, {})),  # stale stamp but kubelet counts GPUs: kept
        (STALE, 0, NodeMemory(0), (False, False, DELETE_NOW)),
        (STALE, 0, SEEN, (False, False, DELETE_NOW)),
        ("Deleted_2026-08-21 06:20:00", 4, SEEN, (True, False, {})),
        ("Deleted_2026-08-21 06:19:00", 4, SEEN, (True, True, REQUEST_NOW)),  # recovered
        ("Deleted_", 4, SEEN, (True, False, {})),
        (REPORTED, 4, SEEN, (True, True, REQUEST_NOW)),
        (None, 4, SEEN, (True, True, REQUEST_NOW)),
        (FRESH, 8, SEEN, (True, True, {})),  # allocatable changed: read the cards again
        (FRESH, 0, SEEN, (False, False, DELETE_NOW)),  # allocatable fell to 0
    ],
)
def test_v2_9(value: str | None, alloc: int, memory: NodeMemory, expected: tuple) -> None:
    assert _outcome(V29, value, alloc, memory) == expected


REMOVE = {HANDSHAKE_ANNOTATION: None}


@pytest.mark.parametrize(
    ("value", "alloc", "memory", "expected"),
    [
        (FRESH, 4, SEEN, (True, False, {})),
        (STALE, 4, SEEN, (True, False, {})),
        ("Requesting_garbage", 0, NodeMemory(0), (True, False, {})),
        (STALE, 0, NodeMemory(0), (False, False, REMOVE)),  # key removed, not Deleted_
        (FRESH, 0, SEEN, (False, False, REMOVE)),
        ("Deleted_2026-08-21 06:20:00", 4, SEEN, (True, True, REQUEST_NOW)),  # no Deleted branch
        (REPORTED, 4, SEEN, (True, True, REQUEST_NOW)),
        (None, 4, NodeMemory(0), (True, True, REQUEST_NOW)),
    ],
)
def test_v2_10(value: str | None, alloc: int, memory: NodeMemory, expected: tuple) -> None:
    memory = NodeMemory(memory.reported, register="[]")
    verdict = check_node(V210, value, alloc, NOW, memory, register="[]")
    assert (verdict.healthy, verdict.refresh, verdict.patch) == expected


def test_v2_10_rereads_the_cards_when_the_register_annotation_changes() -> None:
    first = check_node(V210, FRESH, 4, NOW, NodeMemory(), register="[a]")
    assert first.refresh and first.memory == NodeMemory(4, "[a]")
    same = check_node(V210, FRESH, 4, NOW, first.memory, register="[a]")
    assert not same.refresh
    edited = check_node(V210, FRESH, 4, NOW, same.memory, register="[b]")
    assert edited.refresh and edited.memory.register == "[b]"


def test_v2_10_clean_up_forgets_the_node_so_the_next_pass_re_adds_it() -> None:
    dropped = check_node(V210, FRESH, 0, NOW, NodeMemory(4, "[a]"), register="[a]")
    assert not dropped.healthy and dropped.memory == NodeMemory()
    later = check_node(V210, None, 0, NOW + timedelta(seconds=15), dropped.memory, "[a]")
    assert later.healthy and later.refresh  # re-stamped and offered again (14.3)


@pytest.mark.parametrize("version", list(HamiVersion))
def test_a_plugin_that_follows_its_duty_keeps_the_node_under_every_version(
    version: HamiVersion,
) -> None:
    """Simulate 10 minutes: scheduler pass every 15 s, plugin sync every 30 s, 4 GPUs."""
    value: str | None = None
    memory = NodeMemory()
    start = datetime(2026, 8, 21, 6, 0, 0)
    for second in range(0, 600, 15):
        now = start + timedelta(seconds=second)
        if second % 30 == 0 and plugin_should_report(value):
            value = reported_value(now)
        verdict = check_node(version, value, 4, now, memory, register="[cards]")
        assert verdict.healthy, f"{version.value} dropped the node at +{second}s ({value})"
        value = verdict.patch.get(HANDSHAKE_ANNOTATION, value)
        memory = verdict.memory


def test_a_silent_plugin_is_dropped_by_v2_7_within_a_minute_and_a_half() -> None:
    value: str | None = None
    start = datetime(2026, 8, 21, 6, 0, 0)
    healthy = []
    for second in range(0, 120, 15):
        verdict = check_node(V27, value, 4, start + timedelta(seconds=second))
        healthy.append(verdict.healthy)
        value = verdict.patch.get(HANDSHAKE_ANNOTATION, value)
    assert healthy[:5] == [True] * 5 and False in healthy


@pytest.mark.parametrize(
    ("value", "report"),
    [
        (None, True),
        ("Requesting_2026-08-21 06:20:39", True),
        ("Deleted_2026-08-21 06:20:39", True),
        (REPORTED, False),
    ],
)
def test_the_plugin_answers_the_schedulers_markers(value: str | None, report: bool) -> None:
    assert plugin_should_report(value) is report


def test_stamps_are_read_in_the_schedulers_zone() -> None:
    now = datetime(2026, 8, 21, 6, 20, 39, tzinfo=UTC)
    assert stamp_of("Requesting_2026-08-21 06:20:00", now) == datetime(
        2026, 8, 21, 6, 20, 0, tzinfo=UTC
    )
    assert stamp_of("Requesting", now) is None
    assert "Requesting" not in reported_value(now) and "Deleted" not in reported_value(now)
