"""Reading a Kubernetes watch stream: newline-delimited JSON events, split across chunks."""

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any


class WatchGone(Exception):
    """The watch's resourceVersion is too old (410 Gone): the cache must be relisted."""


class WatchError(Exception):
    """The API ended a watch with an ERROR event other than 410."""


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK or ERROR
    object: Mapping[str, Any]

    @property
    def resource_version(self) -> str:
        meta = self.object.get("metadata")
        return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""

    def raise_if_error(self) -> None:
        """WatchGone for 410 (resourceVersion too old), WatchError for any other ERROR."""
        if self.type != "ERROR":
            return
        message = str(self.object.get("message") or self.object.get("reason") or "no message")
        if self.object.get("code") == 410 or self.object.get("reason") in ("Expired", "Gone"):
            raise WatchGone(message)
        raise WatchError(f"watch error {self.object.get('code')}: {message}")


def iter_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Whole lines from a byte stream whose chunk borders fall anywhere; blank lines dropped."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


def parse_event(line: bytes) -> WatchEvent:
    """One watch line as an event; ValueError names what is wrong with a line that is not one."""
    try:
        raw = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"watch line is not JSON: {line[:200]!r}") from exc
    if not isinstance(raw, Mapping) or not isinstance(raw.get("object"), Mapping):
        raise ValueError(f"watch line has no object: {line[:200]!r}")
    kind = str(raw.get("type") or "")
    if kind not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"):
        raise ValueError(f"watch event of unknown type {kind!r}")
    return WatchEvent(kind, raw["object"])
