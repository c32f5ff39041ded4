"""The public surface is what __all__ says, and every name in it exists."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("module", ["aun_runtime", "protocols", "aun_runtime.testing", "aun_runtime.agentmd"])
def test_all_names_exist_and_none_is_private(module: str) -> None:
    mod = importlib.import_module(module)
    names = mod.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(mod, name), f"{module}.{name} is in __all__ but missing"
        assert not name.startswith("_"), f"{module}.{name} is private"
