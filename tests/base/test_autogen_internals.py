"""The private names of the pinned autogen packages that the runtime builds on, checked on the installed
packages: an upgrade that moves one fails here, naming it, instead of at the import of a core."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
from pathlib import Path

FENCE = Path(__file__).resolve().parents[2] / "aun_runtime" / "base" / "_autogen_internals.py"


def _table(name: str) -> object:
    for node in ast.parse(FENCE.read_text()).body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if isinstance(target, ast.Name) and target.id == name and node.value is not None:
                return ast.literal_eval(node.value)
    raise AssertionError(f"no {name} table in {FENCE.name}")


def test_the_installed_autogen_packages_are_the_pinned_ones() -> None:
    pinned = _table("PINNED")
    assert isinstance(pinned, dict)
    assert {package: importlib.metadata.version(package) for package in pinned} == pinned


def test_every_private_name_is_where_the_fence_imports_it_from() -> None:
    table = _table("PRIVATE_IMPORTS")
    assert isinstance(table, tuple) and table
    moved = []
    for module_name, name in table:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            moved.append(f"{module_name} (the module is gone)")
            continue
        if not hasattr(module, name):
            moved.append(f"{module_name}.{name}")
    assert moved == [], f"moved in the installed autogen packages: {moved}"


def test_the_fence_gives_out_exactly_the_names_of_its_table() -> None:
    from aun_runtime.base import _autogen_internals as fence

    table = _table("PRIVATE_IMPORTS")
    assert isinstance(table, tuple)
    for module_name, name in table:
        assert getattr(fence, name) is getattr(importlib.import_module(module_name), name), name
    assert sorted(name for _, name in table) == sorted(set(fence.__all__) - {"PINNED", "PRIVATE_IMPORTS"})
