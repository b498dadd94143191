"""Numbers and JSON in text that someone else wrote: a tenant's annotation, a node's register.

Python reads such text more loosely than HAMi's Go code and fails in ways that read like a
crash: `int()` takes spaces, `_` and non-ASCII digits, and refuses more than 4300 digits with a
plain ValueError ("Exceeds the limit (4300 digits)"); `json.loads` does the same for a long
number and raises RecursionError for deep nesting. These read the text as Go would, bounded
before any conversion, and fail only with a sentence naming what is wrong.

>>> whole_number("+42", 0, 100)
42
>>> whole_number("9" * 256000, 0, 100)
Traceback (most recent call last):
ValueError: is out of range (0..100)
"""

import json
from typing import Any

from vgpu.domain.errors import CodecError, brief

_ASCII_DIGITS = frozenset("0123456789")
INT64 = (-(2**63), 2**63 - 1)  # the range of Go's int64, which HAMi's numbers are read into
MAX_JSON_DIGITS = 20  # a JSON integer longer than this is no count, size or index of ours


def whole_number(text: str, low: int, high: int) -> int:
    """`text` read as Go's `strconv.ParseInt(text, 10, 64)` reads it, within `low..high`.

    ValueError's message is a phrase to put after the field's name and value: "is not a whole
    number" or "is out of range (low..high)"."""
    negative = text[:1] == "-"
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not _ASCII_DIGITS.issuperset(digits):
        raise ValueError("is not a whole number")
    # int() refuses more than 4300 digits (leading zeros included), and is slow well before
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(max(abs(low), abs(high)))):
        raise ValueError(f"is out of range ({low}..{high})")
    value = -int(significant) if negative else int(significant)
    if not low <= value <= high:
        raise ValueError(f"is out of range ({low}..{high})")
    return value


def read_json(text: str, annotation: str) -> Any:
    """The JSON value of an annotation; CodecError naming the annotation when the text is not
    JSON, holds an integer of more than MAX_JSON_DIGITS digits, or nests too deeply to read."""
    try:
        return json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise CodecError(annotation, f"character {exc.pos}", f"invalid JSON ({exc.msg})") from None
    except _LongNumber as exc:
        raise CodecError(annotation, "whole value", str(exc)) from None
    except RecursionError:
        raise CodecError(annotation, "whole value", "JSON nested too deeply") from None


class _LongNumber(ValueError):
    pass


def _bounded_int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_JSON_DIGITS:
        raise _LongNumber(
            f"the number {brief(literal, 40)} has {len(literal.lstrip('-'))} digits (at most "
            f"{MAX_JSON_DIGITS})"
        )
    return int(literal)
