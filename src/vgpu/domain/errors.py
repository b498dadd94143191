"""Typed errors the domain raises. Each carries a sentence a person can act on."""


class DomainError(ValueError):
    """Base class: bad input or an impossible state, described in plain words."""


class RequestError(DomainError):
    """A container asks for GPU resources with a value that cannot be honoured."""

    def __init__(self, container: str, resource: str, value: object, problem: str) -> None:
        self.container = container
        self.resource = resource
        self.value = value
        super().__init__(f"container {container!r}: {resource}={brief(value)} {problem}")


class CodecError(DomainError):
    """An annotation's text does not follow HAMi's grammar."""

    def __init__(self, annotation: str, position: str, problem: str) -> None:
        self.annotation = annotation
        self.position = position
        super().__init__(f"annotation {annotation}: {position}: {problem}")


class PolicyError(DomainError):
    """A scheduling policy name that vgpu does not know."""


class LedgerError(DomainError):
    """A ledger change that would over-commit a card or names something unknown."""


def brief(value: object, limit: int = 80) -> str:
    """`repr(value)`, cut short so a hostile 5000-character value cannot flood a message."""
    shown = repr(value)
    if len(shown) <= limit:
        return shown
    return f"{shown[:limit]}... ({len(shown)} characters)"


class DraError(DomainError):
    """A `resource.k8s.io/v1` object (ResourceSlice, ResourceClaim, DeviceClass) with a field
    that cannot be read: the message names the object, the field's path and its value."""

    def __init__(self, obj: str, path: str, value: object, problem: str) -> None:
        self.obj = obj
        self.path = path
        self.value = value
        super().__init__(f"{obj}: {path}: {brief(value)} {problem}")

    @classmethod
    def missing(cls, obj: str, path: str) -> "DraError":
        """A required field that is absent (or null)."""
        error = cls(obj, path, None, "")
        error.args = (f"{obj}: {path}: missing",)
        return error
