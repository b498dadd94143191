"""What embedders import: every public name of `vgpu.domain` and `vgpu.domain.dra` exists and
says what it is in a docstring of its own (not the one a dataclass makes from its fields)."""

import inspect
from types import ModuleType

import pytest

import vgpu.domain
import vgpu.domain.dra


@pytest.mark.parametrize("module", [vgpu.domain, vgpu.domain.dra], ids=lambda m: m.__name__)
def test_every_public_name_has_a_docstring(module: ModuleType) -> None:
    undocumented = []
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value) or inspect.ismodule(value):
            doc = value.__doc__ or ""
            if not doc.strip() or doc.startswith(f"{name}("):
                undocumented.append(name)
    assert undocumented == []


def test_public_names_are_unique() -> None:
    for module in (vgpu.domain, vgpu.domain.dra):
        assert len(set(module.__all__)) == len(module.__all__)
