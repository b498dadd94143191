"""Input a user gave that cannot be used, and pydantic errors put into words.

Every command words a validation problem the same way: the field (`nodes[0].gpus`), what is
wrong, the value it got, and where it came from when that is known (a file, a variable).
"""

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

Location = tuple[int | str, ...]
Source = Callable[[Location], str | None]
Hidden = Callable[[str], bool]


class ConfigError(ValueError):
    """A settings or input file cannot be used; the message names the field, value and source."""


def problems(
    exc: ValidationError,
    prefix: str = "",
    source: Source | None = None,
    hidden: Hidden | None = None,
) -> list[str]:
    """One line per error: `<prefix>a.b[0]: <problem> (got <value>) [from <source>]`.

    A rule across fields (an error without a location) is its message alone: it names the
    fields itself. `hidden` leaves out location parts that are not fields the user wrote, such
    as pydantic's names for the branches of a union.
    """
    lines = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        where = field_path(loc, hidden)
        message = str(error["msg"]).removeprefix("Value error, ")
        shown = "" if error["type"] == "missing" or not where else _short(error["input"])
        origin = source(loc) if source is not None else None
        lines.append(
            (f"{prefix}{where}: " if where else "")
            + message
            + (f" (got {shown})" if shown else "")
            + (f" [from {origin}]" if origin else "")
        )
    return lines


def one_line_problems(exc: ValidationError, prefix: str = "", source: Source | None = None) -> str:
    """All of `problems` in one sentence, separated by `; ` (for an HTTP reply's error field)."""
    return "; ".join(problems(exc, prefix, source))


def listed_problems(
    exc: ValidationError, head: str, prefix: str = "", source: Source | None = None
) -> str:
    """`<head>: <problem>` for one problem; for several, `<head>:` and then one indented line
    each, so that a file of the wrong kind reads as a list, not as one line of twenty."""
    lines = problems(exc, prefix, source)
    if len(lines) == 1:
        return f"{head}: {lines[0]}"
    return f"{head}:" + "".join(f"\n  {line}" for line in lines)


def field_path(loc: Location, hidden: Hidden | None = None) -> str:
    """`("nodes", 0, "gpus")` as `nodes[0].gpus`."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif hidden is None or not hidden(part):
            text += f".{part}" if text else part
    return text


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."
