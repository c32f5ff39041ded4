"""``aun-runtime run`` refuses an application that is not an ``async def``, saying how to write one."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from aun_runtime import AUNRuntime
from aun_runtime.cli import load_app


@pytest.fixture
def module() -> Iterator[types.ModuleType]:
    mod = types.ModuleType("aun_test_cli_apps")

    def plain(runtime: AUNRuntime) -> None: ...

    async def fine(runtime: AUNRuntime) -> None: ...

    class Callable:
        async def __call__(self, runtime: AUNRuntime) -> None: ...

    mod.plain = plain  # type: ignore[attr-defined]
    mod.fine = fine  # type: ignore[attr-defined]
    mod.instance = Callable()  # type: ignore[attr-defined]
    sys.modules[mod.__name__] = mod
    yield mod
    del sys.modules[mod.__name__]


def test_a_plain_def_app_is_refused_with_the_signature_to_write(module: types.ModuleType) -> None:
    with pytest.raises(SystemExit, match=r"aun_test_cli_apps:plain is not async") as caught:
        load_app("aun_test_cli_apps:plain")
    assert "async def app(runtime: AUNRuntime) -> None" in str(caught.value)


def test_async_apps_and_async_callables_load(module: types.ModuleType) -> None:
    assert load_app("aun_test_cli_apps:fine") is module.fine
    assert load_app("aun_test_cli_apps:instance") is module.instance

