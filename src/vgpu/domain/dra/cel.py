"""The part of CEL that device selectors need, evaluated as kube-scheduler evaluates it.

A selector sees `device`: `driver`, `allowMultipleAllocations`, `attributes[domain].name`
(int, bool, string, or a semantic version) and `capacity[domain].name` (a quantity). A name
published without a domain belongs to the driver's domain; an unknown domain is an empty map,
so `has(device.attributes["x.io"].y)` is false, while reading a missing name is an error
(`no such key`), as in Kubernetes.

Supported: literals (int, string, bool, lists), `device`, `.field` and `[key]`, `has()`,
`in`, `== != < <= > >=`, `! && ||` (with CEL's rule that `false && error` is false),
`quantity("20Gi")` with `compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`,
`semver("1.2.3")` with the same and `major`, `minor`, `patch`, and the string methods
`startsWith`, `endsWith`, `contains`. Anything else is refused when the selector is compiled
with a SelectorError that says `unsupported`, never evaluated as a guess.

>>> device = DeviceView.of("gpu.vgpu.io", {"productName": "NVIDIA A100"}, {"memory": 80 * 2**30})
>>> compile_selector('device.attributes["gpu.vgpu.io"].productName == "NVIDIA A100" && '
...                  'device.capacity["gpu.vgpu.io"].memory.compareTo(quantity("20Gi")) >= 0'
...                  ).matches(device)
True
>>> compile_selector("device.driver.matches('gpu')")  # doctest: +ELLIPSIS
Traceback (most recent call last):
vgpu.domain.dra.cel.SelectorError: selector "device.driver.matches('gpu')": unsupported method...
"""

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import total_ordering
from typing import Any

from vgpu.domain.dra.model import SEMVER, AttributeValue, Version
from vgpu.domain.errors import DomainError, brief
from vgpu.domain.quantity import parse_quantity

INT64_MAX = 2**63 - 1
MAX_DEPTH = 64  # nesting of a selector; the API server caps a selector's cost long before


class SelectorError(DomainError):
    """A CEL selector vgpu cannot evaluate (unsupported or malformed), or that failed on a
    device (a missing attribute, a type mismatch), as kube-scheduler would report it."""

    def __init__(self, expression: str, problem: str) -> None:
        self.expression = expression
        self.problem = problem
        shown = expression if len(expression) <= 120 else f"{expression[:120]}..."
        super().__init__(f'selector "{shown}": {problem}')


@total_ordering
@dataclass(frozen=True, slots=True)
class _Quantity:
    value: Decimal

    def __lt__(self, other: "_Quantity") -> bool:
        return self.value < other.value


@total_ordering
@dataclass(frozen=True, slots=True)
class _Semver:
    parts: tuple[int, int, int]
    pre: str

    @classmethod
    def parse(cls, text: str) -> "_Semver":
        match = SEMVER.fullmatch(text)
        if match is None:
            raise _Failure(f"{text!r} is not a semantic version")
        major, minor, patch, pre = match.groups()
        return cls((int(major), int(minor), int(patch)), pre or "")

    def __lt__(self, other: "_Semver") -> bool:
        if self.parts != other.parts:
            return self.parts < other.parts
        # a pre-release sorts before its release; between pre-releases, by text (enough here)
        return (self.pre == "", self.pre) < (other.pre == "", other.pre)


def _version(text: str) -> object:
    """A version attribute as selectors compare it; one that is no semantic version (the API
    server refuses those) stays text, so it matches nothing a version would."""
    try:
        return _Semver.parse(text)
    except _Failure:
        return text


@dataclass(frozen=True, slots=True)
class DeviceView:
    """A device as selectors see it: attributes and capacities grouped by domain."""

    driver: str
    allow_multiple_allocations: bool
    attributes: Mapping[str, Mapping[str, object]]
    capacity: Mapping[str, Mapping[str, object]]

    @classmethod
    def of(
        cls,
        driver: str,
        attributes: Mapping[str, AttributeValue],
        capacity: Mapping[str, int],
        allow_multiple_allocations: bool = False,
    ) -> "DeviceView":
        """The view of a device of `driver` with these attributes and capacity values."""
        by_domain: dict[str, dict[str, object]] = {}
        for name, value in attributes.items():
            domain, _, identifier = name.rpartition("/")
            shown = _version(value.text) if isinstance(value, Version) else value
            by_domain.setdefault(domain or driver, {})[identifier] = shown
        quantities: dict[str, dict[str, object]] = {}
        for name, amount in capacity.items():
            domain, _, identifier = name.rpartition("/")
            quantities.setdefault(domain or driver, {})[identifier] = _Quantity(Decimal(amount))
        return cls(driver, allow_multiple_allocations, by_domain, quantities)


class Selector:
    """A compiled selector: `matches(device)` is its value on that device."""

    __slots__ = ("_run", "expression")

    def __init__(self, expression: str, run: Callable[[DeviceView], object]) -> None:
        self.expression = expression
        self._run = run

    def matches(self, device: DeviceView) -> bool:
        """True or False; SelectorError when evaluation fails or the result is no boolean."""
        try:
            result = self._run(device)
        except _Failure as exc:
            raise SelectorError(self.expression, str(exc)) from None
        if type(result) is not bool:
            raise SelectorError(self.expression, f"gives {_type(result)}, not a boolean")
        return result


def compile_selector(expression: str) -> Selector:
    """Parse a CEL selector; SelectorError when it is malformed or outside the subset."""
    try:
        parser = _Parser(expression)
        run = parser.expression()
        parser.expect_end()
    except _Failure as exc:
        raise SelectorError(expression, str(exc)) from None
    except RecursionError:
        raise SelectorError(expression, "nested too deeply") from None
    return Selector(expression, run)


class _Failure(Exception):
    """Why parsing or evaluation stopped (a SelectorError once the expression is known)."""


class _Unsupported(_Failure):
    def __init__(self, what: str) -> None:
        super().__init__(f"unsupported {what} (vgpu evaluates a subset of CEL)")


Eval = Callable[[DeviceView], Any]

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?[uU]?)
      | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op>\|\||&&|==|!=|<=|>=|[<>!()\[\].,?:+\-*/%{}])
    )""",
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}
_RELATIONS = {"==", "!=", "<", "<=", ">", ">=", "in"}
_KEYWORDS = {"true": True, "false": False}


class _Parser:
    """Recursive descent over CEL's precedence: `||` < `&&` < relations < unary < member."""

    def __init__(self, text: str) -> None:
        self._tokens = self._scan(text)
        self._at = 0
        self._depth = 0

    @staticmethod
    def _scan(text: str) -> list[tuple[str, str]]:
        tokens, position = [], 0
        while position < len(text):
            match = _TOKEN.match(text, position)
            if match is None or match.end() == position:
                if text[position:].strip() == "":
                    break
                raise _Failure(f"cannot read {text[position : position + 20].strip()!r}")
            position = match.end()
            kind = match.lastgroup
            assert kind is not None
            tokens.append((kind, match.group(kind)))
        return tokens

    def _peek(self) -> tuple[str, str]:
        return self._tokens[self._at] if self._at < len(self._tokens) else ("end", "")

    def _take(self, value: str | None = None) -> tuple[str, str]:
        token = self._peek()
        if value is not None and token[1] != value:
            shown = "the end" if token[0] == "end" else repr(token[1])
            raise _Failure(f"expected {value!r}, found {shown}")
        if token[0] == "end":
            raise _Failure("ends too soon")
        self._at += 1
        return token

    def expect_end(self) -> None:
        kind, value = self._peek()
        if kind != "end":
            raise _Failure(f"unexpected {value!r}")

    def expression(self) -> Eval:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Failure("nested too deeply")
        try:
            result = self._or()
            if self._peek()[1] == "?":
                raise _Unsupported("conditional operator ?:")
            return result
        finally:
            self._depth -= 1

    def _or(self) -> Eval:
        left = self._and()
        while self._peek()[1] == "||":
            self._take()
            left = _logical(left, self._and(), stop=True)
        return left

    def _and(self) -> Eval:
        left = self._relation()
        while self._peek()[1] == "&&":
            self._take()
            left = _logical(left, self._relation(), stop=False)
        return left

    def _relation(self) -> Eval:
        left = self._unary()
        while self._peek()[1] in _RELATIONS:
            operator = self._take()[1]
            left = _relate(operator, left, self._unary())
        if self._peek()[1] in ("+", "-", "*", "/", "%"):
            raise _Unsupported(f"arithmetic operator {self._peek()[1]}")
        return left

    def _unary(self) -> Eval:
        token = self._peek()[1]
        if token == "!":
            self._take()
            operand = self._unary()
            return lambda d: not _boolean(operand(d), "!")
        if token == "-":
            self._take()
            operand = self._unary()
            return lambda d: -_integer(operand(d), "-")
        return self._member()

    def _member(self) -> Eval:
        value = self._primary()
        while True:
            token = self._peek()[1]
            if token == ".":
                self._take()
                kind, name = self._take()
                if kind != "name":
                    raise _Failure(f"expected a field name after '.', found {name!r}")
                if self._peek()[1] == "(":
                    value = _method(value, name, self._arguments())
                else:
                    value = _select(value, name)
            elif token == "[":
                self._take()
                key = self.expression()
                self._take("]")
                value = _index(value, key)
            else:
                return value

    def _arguments(self) -> list[Eval]:
        self._take("(")
        arguments: list[Eval] = []
        while self._peek()[1] != ")":
            arguments.append(self.expression())
            if self._peek()[1] != ")":
                self._take(",")
        self._take(")")
        return arguments

    def _primary(self) -> Eval:
        kind, value = self._take()
        if kind == "number":
            if not value.isdigit():
                raise _Unsupported(f"number {value!r} (only whole numbers)")
            if len(value) > 19 or int(value) > INT64_MAX:
                raise _Failure(f"number {brief(value, 24)} is out of range")
            number = int(value)
            return lambda d: number
        if kind == "string":
            text = _unquote(value)
            return lambda d: text
        if kind == "name":
            return self._name(value)
        if value == "(":
            inner = self.expression()
            self._take(")")
            return inner
        if value == "[":
            items: list[Eval] = []
            while self._peek()[1] != "]":
                items.append(self.expression())
                if self._peek()[1] != "]":
                    self._take(",")
            self._take("]")
            return lambda d: [item(d) for item in items]
        if value == "{":
            raise _Unsupported("map literal")
        raise _Failure(f"unexpected {value!r}")

    def _name(self, name: str) -> Eval:
        if name in _KEYWORDS:
            constant = _KEYWORDS[name]
            return lambda d: constant
        if self._peek()[1] == "(":
            return self._function(name)
        if name == "device":
            return lambda d: d
        raise _Failure(f"unknown name {name!r} (a selector sees only device)")

    def _function(self, name: str) -> Eval:
        if name == "has":
            self._take("(")
            probe = self._member_for_has()
            self._take(")")
            return probe
        if name in ("quantity", "semver"):
            self._take("(")
            kind, literal = self._take()
            if kind != "string":
                raise _Unsupported(f"{name}() of anything but a string literal")
            self._take(")")
            text = _unquote(literal)
            constant = _make_quantity(text) if name == "quantity" else _Semver.parse(text)
            return lambda d: constant
        raise _Unsupported(f"function {name}()")

    def _member_for_has(self) -> Eval:
        """`has(e.f)`: whether `e` has the field `f`, without failing when it does not."""
        base = self._primary()
        while True:
            token = self._peek()[1]
            if token == "[":
                self._take()
                key = self.expression()
                self._take("]")
                base = _index(base, key)
            elif token == ".":
                self._take()
                kind, field = self._take()
                if kind != "name":
                    raise _Failure(f"expected a field name after '.', found {field!r}")
                if self._peek()[1] == ")":
                    return _has(base, field)
                if self._peek()[1] == "(":
                    raise _Failure("has() takes a field selection, not a call")
                base = _select(base, field)
            else:
                raise _Failure(
                    'has() takes a field selection such as has(device.attributes["x"].y)'
                )


def _unquote(token: str) -> str:
    body = token[1:-1]
    return re.sub(r"\\(.)", lambda m: _escape(m.group(1)), body)


def _escape(char: str) -> str:
    if char not in _ESCAPES:
        raise _Unsupported(f"escape \\{char}")
    return _ESCAPES[char]


def _make_quantity(text: str) -> _Quantity:
    try:
        return _Quantity(parse_quantity(text))
    except ValueError as exc:
        raise _Failure(f"quantity({text!r}): {exc}") from None


def _type(value: object) -> str:
    if type(value) is bool:
        return "bool"
    names = {int: "int", str: "string", list: "list", _Quantity: "quantity", _Semver: "semver"}
    if isinstance(value, DeviceView):
        return "device"
    if isinstance(value, Mapping):
        return "map"
    return names.get(type(value), type(value).__name__)


def _boolean(value: object, operator: str) -> bool:
    if type(value) is not bool:
        raise _Failure(f"no such overload: {operator} on {_type(value)}")
    return value


def _integer(value: object, operator: str) -> int:
    if type(value) is not int:
        raise _Failure(f"no such overload: {operator} on {_type(value)}")
    return value


def _logical(left: Eval, right: Eval, stop: bool) -> Eval:
    """`||` (stop on true) or `&&` (stop on false); an error on one side is forgiven when
    the other side decides, as CEL's commutative logic does."""
    operator = "||" if stop else "&&"

    def run(device: DeviceView) -> bool:
        failure: _Failure | None = None
        for side in (left, right):
            try:
                if _boolean(side(device), operator) is stop:
                    return stop
            except _Failure as exc:
                failure = failure or exc
        if failure is not None:
            raise failure
        return not stop

    return run


def _relate(operator: str, left: Eval, right: Eval) -> Eval:
    if operator == "in":
        return lambda d: _contains(right(d), left(d))
    if operator in ("==", "!="):
        want = operator == "=="
        return lambda d: _equal(left(d), right(d)) is want

    def order(device: DeviceView) -> bool:
        a, b = left(device), right(device)
        if _type(a) != _type(b) or _type(a) not in ("int", "string"):
            raise _Failure(f"no such overload: {_type(a)} {operator} {_type(b)}")
        return bool(
            a < b
            if operator == "<"
            else a <= b
            if operator == "<="
            else a > b
            if operator == ">"
            else a >= b
        )

    return order


def _equal(a: object, b: object) -> bool:
    return _type(a) == _type(b) and a == b


def _contains(container: object, item: object) -> bool:
    if isinstance(container, list):
        return any(_equal(item, element) for element in container)
    if isinstance(container, Mapping):
        return isinstance(item, str) and item in container
    raise _Failure(f"no such overload: in on {_type(container)}")


def _select(base: Eval, field: str) -> Eval:
    def run(device: DeviceView) -> object:
        return _field(base(device), field)

    return run


def _field(value: object, field: str) -> object:
    if isinstance(value, DeviceView):
        fields = {
            "driver": value.driver,
            "allowMultipleAllocations": value.allow_multiple_allocations,
            "attributes": _Domains(value.attributes),
            "capacity": _Domains(value.capacity),
        }
        if field not in fields:
            raise _Failure(f"no such field {field!r} of device")
        return fields[field]
    if isinstance(value, Mapping):
        if field not in value:
            raise _Failure(f"no such key: {field}")
        return value[field]
    raise _Failure(f"no field {field!r} on {_type(value)}")


def _has(base: Eval, field: str) -> Eval:
    def run(device: DeviceView) -> bool:
        value = base(device)
        if isinstance(value, DeviceView):
            return field in ("driver", "allowMultipleAllocations", "attributes", "capacity")
        if isinstance(value, Mapping):
            return field in value
        raise _Failure(f"has() on {_type(value)}")

    return run


class _Domains(Mapping[str, Mapping[str, object]]):
    """`device.attributes` / `device.capacity`: an unknown domain reads as an empty map."""

    __slots__ = ("_by_domain",)

    def __init__(self, by_domain: Mapping[str, Mapping[str, object]]) -> None:
        self._by_domain = by_domain

    def __getitem__(self, domain: str) -> Mapping[str, object]:
        return self._by_domain.get(domain, {})

    def __contains__(self, domain: object) -> bool:
        return domain in self._by_domain

    def __iter__(self) -> Any:
        return iter(self._by_domain)

    def __len__(self) -> int:
        return len(self._by_domain)


def _index(base: Eval, key: Eval) -> Eval:
    def run(device: DeviceView) -> object:
        value, index = base(device), key(device)
        if isinstance(value, Mapping):
            if not isinstance(index, str):
                raise _Failure(f"no such overload: map[{_type(index)}]")
            if isinstance(value, _Domains):
                return value[index]
            if index not in value:
                raise _Failure(f"no such key: {index}")
            return value[index]
        if isinstance(value, list):
            if type(index) is not int:
                raise _Failure(f"no such overload: list[{_type(index)}]")
            if not 0 <= index < len(value):
                raise _Failure(f"index out of range: {index}")
            return value[index]
        raise _Failure(f"no such overload: {_type(value)}[...]")

    return run


_COMPARABLE = {"compareTo", "isGreaterThan", "isLessThan"}
_STRING_METHODS = {"startsWith", "endsWith", "contains"}
_SEMVER_PARTS = {"major": 0, "minor": 1, "patch": 2}


def _order(a: "_Quantity | _Semver", b: "_Quantity | _Semver") -> int:
    """-1, 0 or 1 as `a` is less than, equal to or greater than `b` (of the same type)."""
    if isinstance(a, _Quantity) and isinstance(b, _Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, _Semver) and isinstance(b, _Semver):
        return (b < a) - (a < b)
    raise _Failure(f"no such overload: {_type(a)}.compareTo({_type(b)})")


def _method(receiver: Eval, name: str, arguments: list[Eval]) -> Eval:
    if name not in _COMPARABLE | _STRING_METHODS | set(_SEMVER_PARTS) | {"asInteger"}:
        raise _Unsupported(f"method {name}()")
    wanted = 0 if name in _SEMVER_PARTS or name == "asInteger" else 1
    if len(arguments) != wanted:
        raise _Failure(f"{name}() takes {wanted} argument{'s' if wanted != 1 else ''}")

    def run(device: DeviceView) -> object:
        value = receiver(device)
        values = [argument(device) for argument in arguments]
        if name in _STRING_METHODS:
            if type(value) is not str or type(values[0]) is not str:
                raise _Failure(f"no such overload: {_type(value)}.{name}({_type(values[0])})")
            text, part = value, values[0]
            return (
                text.startswith(part)
                if name == "startsWith"
                else text.endswith(part)
                if name == "endsWith"
                else part in text
            )
        if name in _SEMVER_PARTS:
            if not isinstance(value, _Semver):
                raise _Failure(f"no such overload: {_type(value)}.{name}()")
            return value.parts[_SEMVER_PARTS[name]]
        if name == "asInteger":
            if not isinstance(value, _Quantity) or value.value != int(value.value):
                raise _Failure(f"{_type(value)}.asInteger() has no whole value")
            return int(value.value)
        other = values[0]
        if not isinstance(value, _Quantity | _Semver) or type(other) is not type(value):
            raise _Failure(f"no such overload: {_type(value)}.{name}({_type(other)})")
        order = _order(value, other)
        if name == "compareTo":
            return order
        return order > 0 if name == "isGreaterThan" else order < 0

    return run
