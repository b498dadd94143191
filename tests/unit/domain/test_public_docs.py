"""What the README promises embedders: every name in `vgpu.domain.__all__` has a docstring, and
so has every public method and property of its classes. A constant or a type alias has its
docstring as a string right after its assignment, where editors and documentation tools
read it."""

import ast
import dataclasses
import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import vgpu.domain

NAMES = sorted(vgpu.domain.__all__)


def own_docstring(obj: Any) -> str:
    """The docstring written for `obj`, not one it inherits or dataclass makes up."""
    if not isinstance(obj, type):
        return (obj.__doc__ or "").strip()
    doc = (vars(obj).get("__doc__") or "").strip()
    if dataclasses.is_dataclass(obj) and doc.startswith(f"{obj.__name__}("):
        return ""  # dataclass's generated signature
    return doc


def public_members(cls: type) -> Iterator[tuple[str, Any]]:
    """The functions and properties the class itself defines under a public name."""
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        member = value.__func__ if isinstance(value, staticmethod | classmethod) else value
        member = member.fget if isinstance(member, property) else member
        if inspect.isfunction(member):
            yield name, member


def source_of(name: str) -> tuple[str, ast.Module]:
    """The module `vgpu.domain` imports `name` from, parsed."""
    init = ast.parse(Path(vgpu.domain.__file__).read_text(encoding="utf-8"))
    for node in init.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            module = importlib.import_module(str(node.module))
            return str(node.module), ast.parse(inspect.getsource(module))
    raise AssertionError(f"vgpu.domain does not import {name}")


def attribute_docstring(tree: ast.Module, name: str) -> str:
    """The string right after the top-level assignment of `name`, or ''."""
    for statement, following in zip(tree.body, tree.body[1:], strict=False):
        targets = (
            statement.targets
            if isinstance(statement, ast.Assign)
            else [statement.target]
            if isinstance(statement, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
                return str(following.value.value).strip()
            return ""
    return ""


@pytest.mark.parametrize("name", NAMES)
def test_every_public_name_has_a_docstring(name: str) -> None:
    obj = getattr(vgpu.domain, name)
    if isinstance(obj, type) or inspect.isfunction(obj):
        assert own_docstring(obj), f"vgpu.domain.{name} has no docstring"
    else:
        module, tree = source_of(name)
        assert attribute_docstring(tree, name), (
            f"{module}.{name} has no docstring: a string right after its assignment"
        )


@pytest.mark.parametrize("name", [n for n in NAMES if isinstance(getattr(vgpu.domain, n), type)])
def test_every_public_method_of_a_public_class_has_a_docstring(name: str) -> None:
    cls = getattr(vgpu.domain, name)
    missing = [f"{name}.{m}" for m, member in public_members(cls) if not own_docstring(member)]
    assert missing == []


def test_the_checks_tell_a_written_docstring_from_a_made_up_one() -> None:
    @dataclasses.dataclass
    class Bare:
        size: int

        def grow(self) -> None:
            pass

    @dataclasses.dataclass
    class Written:
        """A written one."""

    assert own_docstring(Bare) == "" and own_docstring(Written) == "A written one."
    assert [m for m, member in public_members(Bare) if not own_docstring(member)] == ["grow"]
    tree = ast.parse('A = 1\n"""Says what A is."""\nB = 2\nC: int = 3\n"""And C."""\n')
    assert attribute_docstring(tree, "A") == "Says what A is."
    assert attribute_docstring(tree, "B") == ""
    assert attribute_docstring(tree, "C") == "And C."
