"""The fields of a Kubernetes manifest that must be an object or a list: absent is empty, and
anything else is a DomainError that names the kind of object, the field and what it got."""

from collections.abc import Mapping, Sequence
from typing import Any

from vgpu.domain.errors import DomainError


def object_field(value: Any, where: str, kind: str = "pod") -> Mapping[str, Any]:
    """`value` as an object (`{}` when None): `pod metadata must be an object, got list`."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DomainError(f"{kind} {where} must be an object, got {type(value).__name__}")
    return value


def list_field(value: Any, where: str, kind: str = "pod") -> Sequence[Any]:
    """`value` as a list (`()` when None): `pod containers must be a list, got str`."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DomainError(f"{kind} {where} must be a list, got {type(value).__name__}")
    return value
