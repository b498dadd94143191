"""Typed errors the domain raises. Each carries a sentence a person can act on."""


class DomainError(ValueError):
    """Base class: bad input or an impossible state, described in plain words."""


class RequestError(DomainError):
    """A container asks for GPU resources with a value that cannot be honoured."""

    def __init__(self, container: str, resource: str, value: object, problem: str) -> None:
        self.container = container
        self.resource = resource
        self.value = value
        super().__init__(f"container {container!r}: {resource}={value!r} {problem}")


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
