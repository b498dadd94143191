"""Kubernetes resource quantities (`20Gi`, `512Mi`, `1500`) as whole numbers."""

import re
from decimal import Decimal, InvalidOperation

_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
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


def parse_quantity(text: str | int) -> Decimal:
    """The exact value of a Kubernetes quantity; ValueError says why it is not one."""
    if isinstance(text, bool):
        raise ValueError("is a boolean, not a quantity")
    if isinstance(text, int):
        return Decimal(text)
    match = _QUANTITY.match(str(text).strip())
    if match is None:
        raise ValueError("is not a Kubernetes quantity")
    number, suffix = match.groups()
    try:
        value = Decimal(number)
    except InvalidOperation as exc:
        raise ValueError("is not a Kubernetes quantity") from exc
    if suffix in _BINARY:
        return value * _BINARY[suffix]
    if suffix in _DECIMAL:
        return value * _DECIMAL[suffix]
    raise ValueError(f"has an unknown unit suffix {suffix!r}")


def memory_mib(text: str | int) -> Decimal:
    """A memory amount in MiB: a plain number is already MiB, a unit-suffixed one is bytes."""
    if isinstance(text, int) or _is_plain_number(text):
        return parse_quantity(text)
    return parse_quantity(text) / _BINARY["Mi"]


def _is_plain_number(text: str) -> bool:
    match = _QUANTITY.match(str(text).strip())
    return match is not None and match.group(2) == ""
