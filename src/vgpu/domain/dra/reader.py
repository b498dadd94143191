"""Reading a `resource.k8s.io/v1` object's JSON field by field.

Every failure is a DraError that names the object, the field's path (`spec.devices[2].capacity
.memory.value`) and the value found. Fields vgpu does not read are ignored, as Kubernetes' own
decoders ignore fields they do not know, so an object from a newer API server still reads;
the fields it does read must have the right type and a sane size.
"""

import re
from decimal import Decimal
from typing import Any, NoReturn

from vgpu.domain.errors import DraError, brief
from vgpu.domain.quantity import parse_quantity

INT64_MAX = 2**63 - 1  # Kubernetes reads quantities and counts into Go's int64
MAX_ITEMS = 1024  # far above any list the API server accepts; a longer one is hostile
MAX_NAME = 253  # a DNS subdomain, the longest name Kubernetes gives an object

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MISSING = object()


class Field:
    """One value inside an object, with where it sits, to read it or say why it cannot be."""

    __slots__ = ("obj", "path", "value")

    def __init__(self, obj: str, path: str, value: object) -> None:
        self.obj = obj
        self.path = path
        self.value = value

    @classmethod
    def root(cls, kind: str, document: object) -> "Field":
        """The whole object, labelled `Kind namespace/name` (or `Kind name`) from its metadata
        when that can be read."""
        label = kind
        if isinstance(document, dict) and isinstance(document.get("metadata"), dict):
            meta = document["metadata"]
            name, namespace = meta.get("name"), meta.get("namespace")
            if isinstance(name, str) and len(name) <= MAX_NAME:
                shown = f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name
                label = f"{kind} {shown[: 2 * MAX_NAME]}"
        return cls(label, "", document)

    def fail(self, problem: str) -> NoReturn:
        raise DraError(self.obj, self.path or "(whole object)", self.value, problem)

    def absent(self) -> NoReturn:
        raise DraError.missing(self.obj, self.path)

    @property
    def present(self) -> bool:
        return self.value is not _MISSING and self.value is not None

    def key(self, name: str) -> "Field":
        """The field `name` of this object (absent: a Field that is not `present`)."""
        mapping = self.mapping()
        if not _PLAIN_KEY.fullmatch(name):
            path = f"{self.path}[{brief(name, 72)}]"
        else:
            path = f"{self.path}.{name}" if self.path else name
        return Field(self.obj, path, mapping.get(name, _MISSING))

    def mapping(self) -> dict[str, Any]:
        """This value as a JSON object; absent or null reads as empty."""
        if not self.present:
            return {}
        if not isinstance(self.value, dict):
            self.fail("is not an object")
        if len(self.value) > MAX_ITEMS:
            self.fail(f"has more than {MAX_ITEMS} entries")
        return self.value

    def entries(self) -> list[tuple[str, "Field"]]:
        """(key, value) of every entry of this JSON object, in order."""
        return [(name, self.key(name)) for name in self.mapping()]

    def items(self) -> list["Field"]:
        """The elements of this JSON array; absent or null reads as empty."""
        if not self.present:
            return []
        if not isinstance(self.value, list):
            self.fail("is not a list")
        if len(self.value) > MAX_ITEMS:
            self.fail(f"has more than {MAX_ITEMS} items")
        return [Field(self.obj, f"{self.path}[{i}]", v) for i, v in enumerate(self.value)]

    def text(self, *, limit: int = MAX_NAME, empty: bool = False) -> str:
        """A string of at most `limit` characters (not empty unless `empty`)."""
        if not self.present:
            if empty:
                return ""
            self.absent()
        if not isinstance(self.value, str):
            self.fail("is not a string")
        if not self.value and not empty:
            self.fail("is empty")
        if len(self.value) > limit:
            self.fail(f"is longer than {limit} characters")
        return self.value

    def optional_text(self, *, limit: int = MAX_NAME) -> str | None:
        return self.text(limit=limit) if self.present else None

    def flag(self) -> bool:
        """A boolean; absent reads as false."""
        if not self.present:
            return False
        if not isinstance(self.value, bool):
            self.fail("is not a boolean")
        return self.value

    def whole(self, low: int, high: int, default: int | None = None) -> int:
        """An integer within `low..high` (absent: `default`, or an error without one)."""
        if not self.present:
            if default is None:
                self.absent()
            return default
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            self.fail("is not a whole number")
        if not low <= self.value <= high:
            self.fail(f"is out of range ({low}..{high})")
        return self.value

    def quantity(self) -> int:
        """A Kubernetes quantity (`20Gi`, `512Mi`, `100`) as an exact whole number of units
        (bytes, cores), from 0 to 2^63 - 1."""
        if not self.present:
            self.absent()
        if not isinstance(self.value, str | int) or isinstance(self.value, bool):
            self.fail("is not a quantity")
        try:
            exact = parse_quantity(self.value)
        except ValueError as exc:
            self.fail(str(exc))
        return whole_quantity(exact, self)

    def qualified_name(self) -> str:
        """An attribute or capacity name: `identifier` or `domain/identifier` (a C identifier
        of at most 32 characters, a DNS subdomain of at most 63)."""
        name = self.text()
        domain, slash, identifier = name.rpartition("/")
        if not _IDENTIFIER.fullmatch(identifier):
            self.fail("is not a qualified name (a C identifier of at most 32 characters)")
        if slash and (len(domain) > 63 or not _DNS_SUBDOMAIN.fullmatch(domain)):
            self.fail("has a domain that is not a DNS subdomain of at most 63 characters")
        return name


def whole_quantity(exact: Decimal, at: Field) -> int:
    """`exact` as an int of 0..2^63 - 1, or a DraError about `at`."""
    if exact < 0:
        at.fail("is negative")
    if exact != exact.to_integral_value():
        at.fail("is not a whole number of units")
    if exact > INT64_MAX:
        at.fail(f"is too large (at most {INT64_MAX})")
    return int(exact)
