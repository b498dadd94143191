"""Which XID errors make a GPU unhealthy, with NVIDIA's device-plugin environment overrides.

An XID is the driver's number for a GPU error. Some XIDs are caused by the application running
on the GPU (a bad kernel, a page fault) and leave the GPU usable; NVIDIA's device plugin ignores
those by default and so does this one. Two variables adjust the rule:

- `DP_DISABLE_HEALTHCHECKS`: `all` or `xids` (as one of its comma-separated items) turns XID
  health checking off; otherwise it is a comma list of further XIDs to ignore.
- `DP_ENABLE_HEALTHCHECKS`: a comma list of XIDs that always count, even when they are in the
  default ignore list or disabled above; `all` or `xids` makes every XID count.

Items that are not numbers are logged and skipped, as NVIDIA's plugin does.
"""

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

DISABLE_ENV = "DP_DISABLE_HEALTHCHECKS"
ENABLE_ENV = "DP_ENABLE_HEALTHCHECKS"

# XIDs caused by applications; the GPU stays healthy (NVIDIA's default ignore list).
APPLICATION_XIDS: frozenset[int] = frozenset({13, 31, 43, 45, 68, 109})

_ALL_WORDS = frozenset({"all", "xids"})


@dataclass(frozen=True, slots=True)
class XidFilter:
    """Decides whether an XID marks a GPU unhealthy."""

    ignored: frozenset[int] = APPLICATION_XIDS
    enabled: frozenset[int] = frozenset()
    ignore_all: bool = False
    enable_all: bool = False

    @property
    def checks_enabled(self) -> bool:
        """False when no XID can ever count, so there is no point watching NVML events."""
        return not self.ignore_all or self.enable_all or bool(self.enabled)

    def is_critical(self, xid: int) -> bool:
        """True when this XID marks the GPU unhealthy."""
        if self.enable_all or xid in self.enabled:
            return True
        return not self.ignore_all and xid not in self.ignored

    def describe(self) -> str:
        """One line for the log: what is ignored and what is forced on."""
        if self.enable_all:
            return "every XID marks a GPU unhealthy (DP_ENABLE_HEALTHCHECKS=all)"
        if not self.checks_enabled:
            return "XID health checks are disabled (DP_DISABLE_HEALTHCHECKS)"
        if self.ignore_all:
            return f"only XIDs {_numbers(self.enabled)} mark a GPU unhealthy"
        text = f"ignoring XIDs {_numbers(self.ignored - self.enabled)}"
        return f"{text}; always counting {_numbers(self.enabled)}" if self.enabled else text


def xid_filter_from_env(env: Mapping[str, str]) -> XidFilter:
    """The filter NVIDIA's plugin would use with these environment variables."""
    disable_all, disabled = _parse(env.get(DISABLE_ENV, ""), DISABLE_ENV)
    enable_all, enabled = _parse(env.get(ENABLE_ENV, ""), ENABLE_ENV)
    return XidFilter(
        ignored=APPLICATION_XIDS | disabled,
        enabled=enabled,
        ignore_all=disable_all,
        enable_all=enable_all,
    )


def _parse(value: str, name: str) -> tuple[bool, frozenset[int]]:
    items = [item.strip().lower() for item in value.split(",")]
    if any(item in _ALL_WORDS for item in items):
        return True, frozenset()
    numbers: set[int] = set()
    for item in items:
        if not item:
            continue
        if item.isdecimal():
            numbers.add(int(item))
        else:
            log.warning("%s: ignoring %r, which is not an XID number", name, item)
    return False, frozenset(numbers)


def _numbers(values: Iterable[int]) -> str:
    return ",".join(str(v) for v in sorted(values)) or "(none)"
