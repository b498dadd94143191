"""`hami.io/node-handshake`: how HAMi schedulers judge a node's device plugin alive
(docs/protocol.md#node-handshake).

Two sides live here, both pure:

- the device plugin's: `plugin_should_report` says when to write `reported_value(now)` so that
  schedulers of every HAMi version from v2.7 to v2.10 keep the node (14.4);
- the scheduler's: `check_node` is HAMi's per-node health pass for one scheduler version (14.3),
  given the handshake value, the node's allocatable count and what the scheduler remembers of
  the node; it returns whether the node is healthy, whether its cards must be re-read, and the
  annotation patch to write (`Requesting_<now>`, the clean-up marker, or the key's removal).

>>> verdict = check_node(HamiVersion.V2_10, None, 4, datetime(2026, 8, 21, 6, 20, 39))
>>> verdict.healthy, verdict.refresh, verdict.patch
(True, True, {'hami.io/node-handshake': 'Requesting_2026-08-21 06:20:39'})
"""

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import Enum

HANDSHAKE_ANNOTATION = "hami.io/node-handshake"
REQUESTING = "Requesting"
DELETED = "Deleted"
REPORTED = "Reported"
STALE_AFTER = timedelta(seconds=60)
# Go layouts: `2006-01-02 15:04:05` since v2.5, `2006.01.02 15:04:05` in v2.4.
_LAYOUT = "%Y-%m-%d %H:%M:%S"
_LAYOUT_V24 = "%Y.%m.%d %H:%M:%S"

Patch = dict[str, str | None]  # a merge patch of node annotations; None removes the key


class HamiVersion(Enum):
    """The HAMi scheduler releases whose handshake rules differ."""

    V2_7 = "v2.7"  # and older: the plugin's `Reported` write is the heartbeat
    V2_8 = "v2.8"  # NVIDIA: only allocatable counts, the handshake is not consulted
    V2_9 = "v2.9"  # shared check with allocatable guard, `Deleted_` recovers after 60 s
    V2_10 = "v2.10"  # as v2.9, no `Deleted_` (key removed), register changes refresh


@dataclass(frozen=True, slots=True)
class NodeMemory:
    """What a HAMi scheduler keeps in memory per node: the allocatable count it last saw and
    (v2.10) the register annotation it last read. Both start empty after a restart."""

    reported: int = 0
    register: str | None = None


@dataclass(frozen=True, slots=True)
class HandshakeVerdict:
    """One node's outcome of a health pass.

    `healthy` False means the scheduler drops the node's cards of this vendor; `refresh` True
    means it re-reads the register annotation; `patch` is what it writes on the node (empty:
    nothing); `memory` replaces what it remembers of the node.
    """

    healthy: bool
    refresh: bool
    patch: Patch
    memory: NodeMemory


def reported_value(now: datetime) -> str:
    """What a device plugin writes to say it is alive, as HAMi's plugins up to v2.7 did.

    Go's `time.String()` form without the monotonic reading; schedulers only look for the
    absence of `Requesting` and `Deleted`.

    >>> from datetime import UTC
    >>> reported_value(datetime(2024, 1, 23, 4, 30, 4, 434037, tzinfo=UTC))
    'Reported 2024-01-23 04:30:04.434037 +0000 UTC'
    """
    zone = now.strftime("%z") or "+0000"
    name = now.tzname() or "UTC"
    return f"{REPORTED} {now.strftime('%Y-%m-%d %H:%M:%S.%f')} {zone} {name}"


def plugin_should_report(value: str | None) -> bool:
    """Whether the device plugin must (re)write `Reported <now>` on seeing `value`.

    A scheduler up to v2.7 drops the node 60 s after its `Requesting_` stamp unless the plugin
    overwrites it, and a v2.9 one only recovers a `Deleted_` node when it sees another value;
    a v2.10 one takes a `Reported` value as a cue to re-read the cards. So: whenever the value
    is absent or is one of the scheduler's own markers. Writing every 30 s (the register
    interval) keeps a stamp from ever reaching 60 s.
    """
    return value is None or REQUESTING in value or DELETED in value


def requesting_value(now: datetime) -> str:
    """The scheduler's stamp, `Requesting_<local time>` in HAMi's v2.5+ layout."""
    return f"{REQUESTING}_{now.strftime(_LAYOUT)}"


def deleted_value(now: datetime) -> str:
    """The clean-up marker HAMi schedulers up to v2.9 write on a dropped node."""
    return f"{DELETED}_{now.strftime(_LAYOUT)}"


def stamp_of(value: str, now: datetime) -> datetime | None:
    """The time after `Requesting_`/`Deleted_`, read in `now`'s zone; None if unreadable."""
    _, separator, text = value.partition("_")
    if not separator:
        return None
    for layout in (_LAYOUT, _LAYOUT_V24):
        try:
            return datetime.strptime(text.strip(), layout).replace(tzinfo=now.tzinfo)
        except ValueError:
            continue
    return None


def check_node(
    version: HamiVersion,
    handshake: str | None,
    allocatable: int,
    now: datetime,
    memory: NodeMemory | None = None,
    register: str | None = None,
) -> HandshakeVerdict:
    """HAMi's health pass over one node for the NVIDIA vendor, as `version` runs it.

    `handshake` is the node's `hami.io/node-handshake` (None when absent), `allocatable` its
    `status.allocatable["nvidia.com/gpu"]`, `now` the scheduler's local time (naive or aware,
    stamps are read in its zone), `register` the node's `hami.io/node-nvidia-register` value.
    """
    memory = memory or NodeMemory()
    if version is HamiVersion.V2_7:
        verdict = _shared_v27(handshake, now, memory)
    elif version is HamiVersion.V2_8:
        verdict = _allocatable_only(allocatable, memory)
    else:
        shared = _shared_v29(handshake, allocatable, now, version, memory)
        verdict = _nvidia_wrapper(shared, allocatable, memory)
    if version is HamiVersion.V2_10:
        return _v210(verdict, allocatable, memory, register)
    if verdict.healthy:
        return verdict
    return replace(verdict, patch={HANDSHAKE_ANNOTATION: deleted_value(now)})


def _v210(
    verdict: HandshakeVerdict, allocatable: int, before: NodeMemory, register: str | None
) -> HandshakeVerdict:
    """v2.10 re-reads the cards when the register annotation changed, and its clean-up removes
    the key and forgets the node."""
    if not verdict.healthy:
        return replace(verdict, patch={HANDSHAKE_ANNOTATION: None}, memory=NodeMemory())
    changed = allocatable > 0 and allocatable == before.reported and register != before.register
    return replace(
        verdict,
        refresh=verdict.refresh or changed,
        memory=replace(verdict.memory, register=register),
    )


def _is_stale(value: str, now: datetime) -> bool | None:
    """True when the stamp in `value` is older than 60 s; None when it cannot be read."""
    stamp = stamp_of(value, now)
    return None if stamp is None else now - stamp > STALE_AFTER


def _request(now: datetime, memory: NodeMemory) -> HandshakeVerdict:
    return HandshakeVerdict(True, True, {HANDSHAKE_ANNOTATION: requesting_value(now)}, memory)


def _keep(memory: NodeMemory) -> HandshakeVerdict:
    return HandshakeVerdict(True, False, {}, memory)


def _drop(memory: NodeMemory) -> HandshakeVerdict:
    return HandshakeVerdict(False, False, {}, memory)


def _shared_v27(value: str | None, now: datetime, memory: NodeMemory) -> HandshakeVerdict:
    if value is not None and REQUESTING in value:
        # An unreadable stamp is kept, as later versions do (the v2.7 behaviour is unconfirmed).
        return _drop(memory) if _is_stale(value, now) else _keep(memory)
    if value is not None and DELETED in value:
        return _keep(memory)  # cards stay dropped until the plugin writes again
    return _request(now, memory)


def _shared_v29(
    value: str | None,
    allocatable: int,
    now: datetime,
    version: HamiVersion,
    memory: NodeMemory,
) -> HandshakeVerdict:
    if value is not None and REQUESTING in value:
        if not _is_stale(value, now) or allocatable > 0:
            return _keep(memory)
        return _drop(memory)
    if version is HamiVersion.V2_9 and value is not None and DELETED in value:
        return _request(now, memory) if _is_stale(value, now) else _keep(memory)
    return _request(now, memory)


def _allocatable_only(allocatable: int, memory: NodeMemory) -> HandshakeVerdict:
    """v2.8's NVIDIA check: the node lives while kubelet counts its GPUs."""
    if allocatable == 0:
        if memory.reported == 0:
            return _keep(memory)
        return _drop(replace(memory, reported=0))
    if allocatable != memory.reported:
        return HandshakeVerdict(True, True, {}, replace(memory, reported=allocatable))
    return _keep(memory)


def _nvidia_wrapper(
    shared: HandshakeVerdict, allocatable: int, memory: NodeMemory
) -> HandshakeVerdict:
    """v2.9+: the shared handshake check combined with kubelet's allocatable count."""
    if allocatable == 0:
        if memory.reported == 0:
            return shared
        return replace(shared, healthy=False, memory=replace(memory, reported=0))
    if allocatable != memory.reported:
        reported = replace(memory, reported=allocatable)
        return replace(shared, healthy=True, refresh=True, memory=reported)
    return shared
