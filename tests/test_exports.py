"""The public surface is what the public modules' ``__all__`` say, every name in it exists, and one
name means one thing wherever it is exported.

A module is public when no part of its dotted name starts with ``_``. The public modules are found
by walking the three packages, so a new public module is held to these rules without being listed.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("aun_runtime", "protocols", "agents")
#: Public modules that are programs rather than libraries: run, not imported from.
PROGRAMS = {"aun_runtime.__main__"}


def _public_modules() -> list[str]:
    found: list[str] = []
    for package in PACKAGES:
        found.append(package)
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=package + "."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                found.append(info.name)
    return sorted(found)


PUBLIC = _public_modules()


def test_the_walk_finds_the_public_modules() -> None:
    # A guard on the walk itself: these exist, and a private module is never taken for a public one.
    assert {"aun_runtime", "aun_runtime.testing", "aun_runtime.network", "protocols.aun", "agents.observer"} <= set(PUBLIC)
    assert not [name for name in PUBLIC if "._" in name]


@pytest.mark.parametrize("name", PUBLIC)
def test_all_names_exist_and_none_is_private(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__, f"{name} has no module docstring"
    names = getattr(module, "__all__", None)
    assert names is not None, f"{name} has no __all__"
    assert len(names) == len(set(names)), f"{name}.__all__ lists a name twice"
    for exported in names:
        assert hasattr(module, exported), f"{name}.{exported} is in __all__ but missing"
        assert not exported.startswith("_"), f"{name}.{exported} is private"


def _exports() -> dict[str, list[tuple[str, object]]]:
    by_name: dict[str, list[tuple[str, object]]] = {}
    for name in PUBLIC:
        module: ModuleType = importlib.import_module(name)
        for exported in module.__all__:
            by_name.setdefault(exported, []).append((name, getattr(module, exported)))
    return by_name


def test_one_name_is_one_object_wherever_it_is_exported() -> None:
    # A re-export is the same object under the same name (aun_runtime re-exports the message model
    # from protocols, so that an application needs one import line); two different classes under
    # one public name would be caught by one except clause and not the other.
    clashes = {
        exported: sorted(module for module, _ in places)
        for exported, places in _exports().items()
        if len({id(value) for _, value in places}) > 1 and not all(isinstance(v, (str, int, float)) for _, v in places)
    }
    assert clashes == {}


def test_the_reference_lists_every_public_module_with_its_names() -> None:
    # The public surface, listed once: the API reference's index has a row for every public module
    # (but the programs and the stand-in models), naming exactly what its __all__ exports.
    index = (ROOT / "docs" / "reference" / "index.md").read_text()
    rows: dict[str, list[str]] = {}
    for line in index.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        found = re.match(r"\[?`([a-z_.]+)`", cells[0]) if len(cells) == 3 else None
        if found is not None:
            rows[found.group(1)] = re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", cells[2])
    expected = {name for name in PUBLIC if name not in PROGRAMS and not name.startswith("agents.stand_ins")}
    assert set(rows) == expected
    stale = {name: names for name, names in rows.items() if names != list(importlib.import_module(name).__all__)}
    assert stale == {}
