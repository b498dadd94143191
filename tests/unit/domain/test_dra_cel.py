"""Device selectors: the CEL subset vgpu evaluates, checked against a CEL implementation
where the two overlap, and everything outside refused rather than guessed."""

import doctest
from typing import Any

import celpy  # type: ignore[import-untyped]
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vgpu.domain.dra import GpuCard, gpu_device
from vgpu.domain.dra import cel as cel_module
from vgpu.domain.dra.cel import DeviceView, SelectorError, compile_selector

DRIVER = "gpu.vgpu.io"
CARD = GpuCard(
    "GPU-0fc3", 0, "NVIDIA A100-SXM4-80GB", 81920, architecture="Ampere", driver_version="550.54.15"
)
DEVICE = gpu_device(CARD)
VIEW = DeviceView.of(
    DRIVER,
    {**DEVICE.attributes, "other.example.com/fast": True},
    {name: c.value for name, c in DEVICE.capacity.items()},
    DEVICE.allow_multiple_allocations,
)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.driver == "gpu.vgpu.io"', True),
        ('device.driver == "gpu.nvidia.com"', False),
        ('device.attributes["gpu.vgpu.io"].productName == "NVIDIA A100-SXM4-80GB"', True),
        ("device.attributes['gpu.vgpu.io']['productName'] != 'NVIDIA A100-SXM4-80GB'", False),
        ('device.attributes["gpu.vgpu.io"].uuid in ["GPU-1", "GPU-0fc3"]', True),
        ('device.attributes["gpu.vgpu.io"].uuid in ["GPU-1"]', False),
        (
            'device.attributes["gpu.vgpu.io"].index == 0 && device.attributes["gpu.vgpu.io"].numaNode < 1',
            True,
        ),
        ('device.capacity["gpu.vgpu.io"].memory.compareTo(quantity("20Gi")) >= 0', True),
        ('device.capacity["gpu.vgpu.io"].memory.compareTo(quantity("81Gi")) >= 0', False),
        ('device.capacity["gpu.vgpu.io"].memory.compareTo(quantity("80Gi")) == 0', True),
        ('device.capacity["gpu.vgpu.io"].cores.isGreaterThan(quantity("99"))', True),
        ('device.capacity["gpu.vgpu.io"].cores.isLessThan(quantity("100"))', False),
        ('device.capacity["gpu.vgpu.io"].cores.asInteger() == 100', True),
        ('device.attributes["gpu.vgpu.io"].driverVersion.isGreaterThan(semver("550.0.0"))', True),
        (
            'device.attributes["gpu.vgpu.io"].driverVersion.compareTo(semver("550.54.15")) == 0',
            True,
        ),
        ('device.attributes["gpu.vgpu.io"].driverVersion.major() == 550', True),
        ("device.allowMultipleAllocations", True),
        ("device.allowMultipleAllocations == false", False),
        ('has(device.attributes["gpu.vgpu.io"].architecture)', True),
        ('has(device.attributes["gpu.vgpu.io"].pcieBusID)', False),
        ('has(device.attributes["nowhere.example.com"].anything)', False),
        ('device.attributes["other.example.com"].fast', True),
        ('!has(device.attributes["x.io"].y) || device.attributes["x.io"].y == 1', True),
        ('device.attributes["gpu.vgpu.io"].productName.startsWith("NVIDIA A100")', True),
        ('device.attributes["gpu.vgpu.io"].productName.contains("H100")', False),
        ('device.attributes["gpu.vgpu.io"].architecture.endsWith("pere")', True),
        ('(device.driver == "a" || device.driver == "gpu.vgpu.io") && !(1 > 2)', True),
        ('false && device.attributes["gpu.vgpu.io"].missing == 1', False),
        ('device.attributes["gpu.vgpu.io"].missing == 1 || true', True),
        ('"gpu.vgpu.io" in device.attributes', True),
        ("-1 < 0", True),
    ],
)
def test_selectors_on_a_vgpu_device(expression: str, expected: bool) -> None:
    assert compile_selector(expression).matches(VIEW) is expected


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ('device.attributes["gpu.vgpu.io"].uuid.matches("GPU-.*")', "unsupported method matches()"),
        ("size(device.attributes) > 0", "unsupported function size()"),
        ('device.driver == "a" ? true : false', "unsupported conditional operator ?:"),
        ("device.attributes['gpu.vgpu.io'].index + 1 == 1", "unsupported arithmetic operator +"),
        ("{'a': 1}.a == 1", "unsupported map literal"),
        ("1.5 > 1", "unsupported number '1.5'"),
        (
            "quantity(device.driver).isGreaterThan(quantity('1'))",
            "unsupported quantity() of anything",
        ),
        ('device.driver == "\\x41"', "unsupported escape \\x"),
        ("node.name == 'a'", "unknown name 'node'"),
        ("(device.driver == 'a'", "expected ')', found the end"),
        ("device.driver == 'a')", "unexpected ')'"),
        ("", "ends too soon"),
        ("device.driver == 'a' @", "cannot read '@'"),
        ("quantity('lots') == quantity('1')", "quantity('lots'): is not a Kubernetes quantity"),
        ("99999999999999999999 > 1", "is out of range"),
        ("(" * 200 + "true" + ")" * 200, "nested too deeply"),
        ("has(device.driver())", "has() takes a field selection, not a call"),
    ],
)
def test_an_expression_outside_the_subset_is_refused_when_compiled(
    expression: str, problem: str
) -> None:
    with pytest.raises(SelectorError) as caught:
        compile_selector(expression)
    assert problem in str(caught.value)
    assert str(caught.value).startswith("selector ")


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ('device.attributes["gpu.vgpu.io"].productNam == "x"', "no such key: productNam"),
        ('device.capacity["gpu.vgpu.io"].memory > 5', "no such overload: quantity > int"),
        ("device.driver < 5", "no such overload: string < int"),
        ("device.driver", "gives string, not a boolean"),
        ("!device.driver", "no such overload: ! on string"),
        ("device.gpu == 1", "no such field 'gpu' of device"),
        (
            'device.capacity["gpu.vgpu.io"].memory.compareTo(semver("1.0.0")) == 0',
            "no such overload",
        ),
        ('device.attributes["gpu.vgpu.io"].uuid in "GPU"', "no such overload: in on string"),
        ('device.attributes["gpu.vgpu.io"].missing == 1 && true', "no such key: missing"),
    ],
)
def test_a_selector_that_fails_on_a_device_says_why(expression: str, problem: str) -> None:
    selector = compile_selector(expression)
    with pytest.raises(SelectorError) as caught:
        selector.matches(VIEW)
    assert problem in str(caught.value)


def test_docstring_examples_hold() -> None:
    result = doctest.testmod(cel_module)
    assert result.failed == 0 and result.attempted > 0


# Where the subset overlaps plain CEL, it must agree with a CEL implementation (cel-python):
# same value, or an error on both sides.
_ATTRIBUTES: dict[str, Any] = {"name": "a100", "index": 3, "fast": True, "zone": "b"}
_PLAIN_VIEW = DeviceView.of(DRIVER, _ATTRIBUTES, {})
_CEL_DEVICE = celpy.json_to_cel({"driver": DRIVER, "attributes": {DRIVER: _ATTRIBUTES}})
_ENV = celpy.Environment()

# Typed operands: heterogeneous `==` is false in Kubernetes' cel-go but an error in
# cel-python, so equality compares operands of one type (mixed types only under `<`, an error
# in both); `absent` is a missing key, an error in both.
_absent = st.just(f'device.attributes["{DRIVER}"].absent')
_strings = st.one_of(
    st.sampled_from([f'device.attributes["{DRIVER}"].name', f'device.attributes["{DRIVER}"].zone']),
    st.sampled_from(['"a100"', '"b"', '"zone"', "device.driver"]),
    _absent,
)
_ints = st.one_of(
    st.just(f'device.attributes["{DRIVER}"].index'), st.integers(-5, 5).map(str), _absent
)
_bools = st.sampled_from([f'device.attributes["{DRIVER}"].fast', "true", "false"])
_ops = st.sampled_from(["==", "!=", "<", "<=", ">", ">="])


def _compare(operands: st.SearchStrategy[str], ops: st.SearchStrategy[str]) -> Any:
    return st.builds(lambda a, op, b: f"{a} {op} {b}", operands, ops, operands)


_relation = st.one_of(
    _compare(_strings, _ops),
    _compare(_ints, _ops),
    _compare(_bools, st.sampled_from(["==", "!="])),
    st.builds(lambda a, b: f"{a} < {b}", _strings, _ints),
)
_membership = st.one_of(
    st.builds(lambda a, xs: f"{a} in [{', '.join(xs)}]", _strings, st.lists(_strings, max_size=3)),
    st.builds(lambda a, xs: f"{a} in [{', '.join(xs)}]", _ints, st.lists(_ints, max_size=3)),
)
_names = st.sampled_from(["name", "index", "fast", "zone", "absent"])
_attribute = _names.map(lambda n: f'device.attributes["{DRIVER}"].{n}')
_has = _names.map(lambda n: f'has(device.attributes["{DRIVER}"].{n})')
_atom = st.one_of(_relation, _membership, _has, _attribute, st.sampled_from(["true", "false"]))
_expression = st.recursive(
    _atom,
    lambda inner: st.one_of(
        inner.map(lambda e: f"!({e})"),
        st.builds(lambda a, b: f"({a}) && ({b})", inner, inner),
        st.builds(lambda a, b: f"({a}) || ({b})", inner, inner),
    ),
    max_leaves=6,
)


def _cel_python(expression: str) -> bool | None:
    """cel-python's value, or None for a CEL error (raised or returned as a value)."""
    try:
        value = _ENV.program(_ENV.compile(expression)).evaluate({"device": _CEL_DEVICE})
    except celpy.CELEvalError:
        return None
    except Exception:
        # cel-python itself breaks on some error-joining `&&`/`||` chains (IndexError,
        # TypeError): no verdict to compare with
        assume(False)
    return bool(value) if isinstance(value, celpy.celtypes.BoolType) else None


def _ours(expression: str) -> bool | None:
    try:
        return compile_selector(expression).matches(_PLAIN_VIEW)
    except SelectorError:
        return None


@settings(max_examples=300, deadline=None)
@given(_expression)
def test_the_subset_agrees_with_cel_where_they_overlap(expression: str) -> None:
    assert _ours(expression) == _cel_python(expression), expression
