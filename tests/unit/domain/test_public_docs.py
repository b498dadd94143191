"""What the README promises embedders: every name in `vgpu.domain.__all__` (and in
`vgpu.domain.dra.__all__`, the DRA face) has a docstring, exactly once in `__all__`, and so has every public method and property of its classes. A constant or a type alias has its
docstring as a string right after its assignment, where editors and documentation tools
read it."""

import ast
import dataclasses
import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import vgpu.domain
import vgpu.domain.dra

FACES = (vgpu.domain, vgpu.domain.dra)
NAMES = [(face, name) for face in FACES for name in sorted(face.__all__)]


def ids(case: Any) -> str:
    return f"{case[0].__name__}.{case[1]}" if isinstance(case, tuple) else str(case)


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


def source_of(face: ModuleType, name: str) -> tuple[str, ast.Module]:
    """The module that assigns `name`, following `face`'s re-exports, parsed."""
    tree = ast.parse(Path(str(face.__file__)).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            return source_of(importlib.import_module(str(node.module)), name)
    return face.__name__, tree


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


@pytest.mark.parametrize("case", NAMES, ids=ids)
def test_every_public_name_has_a_docstring(case: tuple[ModuleType, str]) -> None:
    face, name = case
    obj = getattr(face, name)
    if isinstance(obj, type) or inspect.isfunction(obj) or inspect.ismodule(obj):
        assert own_docstring(obj), f"{face.__name__}.{name} has no docstring"
    else:
        module, tree = source_of(face, name)
        assert attribute_docstring(tree, name), (
            f"{module}.{name} has no docstring: a string right after its assignment"
        )


@pytest.mark.parametrize(
    "case", [(f, n) for f, n in NAMES if isinstance(getattr(f, n), type)], ids=ids
)
def test_every_public_method_of_a_public_class_has_a_docstring(
    case: tuple[ModuleType, str],
) -> None:
    face, name = case
    cls = getattr(face, name)
    missing = [f"{name}.{m}" for m, member in public_members(cls) if not own_docstring(member)]
    assert missing == []


@pytest.mark.parametrize("face", FACES, ids=lambda f: f.__name__)
def test_each_public_name_is_exported_once(face: ModuleType) -> None:
    assert len(set(face.__all__)) == len(face.__all__)


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
