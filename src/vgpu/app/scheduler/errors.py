"""Turn pydantic validation errors into one sentence that names each bad field and value."""

from collections.abc import Callable

from pydantic import ValidationError

Source = Callable[[tuple[int | str, ...]], str | None]


def explain(exc: ValidationError, prefix: str = "", source: Source | None = None) -> str:
    """`a.b: <problem> (got <value>); c: ...` for every error; `source` may name where a field
    came from (a file, an environment variable)."""
    parts = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        where = ".".join(str(p) for p in loc) or "(top level)"
        shown = repr(error.get("input"))
        if len(shown) > 80:
            shown = shown[:77] + "..."
        detail = "" if error["type"] == "missing" else f" (got {shown})"
        origin = source(loc) if source is not None else None
        suffix = f" [from {origin}]" if origin else ""
        parts.append(f"{prefix}{where}: {error['msg']}{detail}{suffix}")
    return "; ".join(parts)
