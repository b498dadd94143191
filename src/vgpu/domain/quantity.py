"""Kubernetes resource quantities (`20Gi`, `512Mi`, `1500`) as exact numbers, bounded.

A quantity comes from a tenant's pod spec, so its text is hostile until proven otherwise: it is
read only when short, with a modest exponent, and computed in a context that raises instead of
rounding, so `1e999999Gi` or a 5000-digit number is refused (never an overflow or a long
computation) and `1e-999999999` is never rounded to 0.
"""

import re
from collections.abc import Callable
from decimal import Context, Decimal, DecimalException, Inexact, Overflow, Underflow

MAX_TEXT = 64  # characters; Kubernetes' own quantities are far shorter
MAX_EXPONENT = 30  # |exponent| of the number as written; 1e30 is already far past any card

_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
# Within the bounds above every product is exact with 200 digits; any rounding would raise.
_EXACT = Context(prec=200, Emax=999, Emin=-999, traps=[Overflow, Underflow, Inexact])


def parse_quantity(text: str | int) -> Decimal:
    """The exact value of a Kubernetes quantity; ValueError says why it is not one."""
    if isinstance(text, bool):
        raise ValueError("is a boolean, not a quantity")
    if isinstance(text, int):
        if abs(text) >= 10**MAX_EXPONENT:
            raise ValueError(f"is out of range (at most {MAX_EXPONENT} digits)")
        return Decimal(text)
    number, suffix = _split(text)
    try:
        value = Decimal(number)
    except DecimalException as exc:  # an exponent too large for Decimal itself
        raise ValueError("is out of range") from exc
    if value and not -MAX_EXPONENT <= value.adjusted() <= MAX_EXPONENT:
        raise ValueError(f"is out of range (exponent beyond +-{MAX_EXPONENT})")
    if suffix in _BINARY:
        return _exact(_EXACT.multiply, value, Decimal(_BINARY[suffix]))
    if suffix in _DECIMAL:
        return _exact(_EXACT.multiply, value, _DECIMAL[suffix])
    raise ValueError(f"has an unknown unit suffix {suffix!r}")


def memory_mib(text: str | int) -> Decimal:
    """A memory amount in MiB: a plain number is already MiB, a unit-suffixed one is bytes."""
    if isinstance(text, int) or _split(text)[1] == "":
        return parse_quantity(text)
    return _exact(_EXACT.divide, parse_quantity(text), Decimal(_BINARY["Mi"]))


def _split(text: object) -> tuple[str, str]:
    """(number, unit suffix) of a quantity's text; ValueError when it is not one."""
    stripped = str(text).strip()
    if len(stripped) > MAX_TEXT:
        raise ValueError(f"is longer than {MAX_TEXT} characters")
    match = _QUANTITY.fullmatch(stripped)
    if match is None:
        raise ValueError("is not a Kubernetes quantity")
    number, suffix = match.groups()
    return number, suffix


def _exact(operation: Callable[[Decimal, Decimal], Decimal], a: Decimal, b: Decimal) -> Decimal:
    try:
        return operation(a, b)
    except DecimalException as exc:  # not reached within the bounds; still a denial, not a crash
        raise ValueError("is out of range") from exc
