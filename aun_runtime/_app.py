"""Applications given by import string: what an app is, and how one is loaded.

An application is an `async def app(runtime)` that registers agents and groups on a started
[`AUNRuntime`][aun_runtime.AUNRuntime]. The commands (`run`, `worker`, `console`) load it by import
string, so the library never imports an application itself.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, cast

if TYPE_CHECKING:
    from ._runtime import AUNRuntime

__all__ = ["App", "load_app"]

App: TypeAlias = "Callable[[AUNRuntime], Awaitable[None]]"

#: What an application must be, for the errors that say it is not.
_APP_SIGNATURE = (
    "an app is a coroutine function, `async def app(runtime: AUNRuntime) -> None`, that registers agents "
    "and groups on the started runtime it is given (write `async def`, not `def`)"
)


def load_app(spec: str) -> App:
    """Import `module:attribute` and return the application function."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"error: an app is given as module:function, e.g. agents.demo:app (got {spec!r})")
    sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SystemExit(f"error: cannot import {module_name!r}: {exc}") from None
    app = getattr(module, attribute, None)
    if not callable(app):
        raise SystemExit(f"error: {module_name} has no callable {attribute!r}")
    if not _is_async(app):
        raise SystemExit(f"error: {spec} is not async: {_APP_SIGNATURE}")
    return cast("App", app)


def _is_async(app: object) -> bool:
    # A coroutine function, a partial of one, or an object whose __call__ is one.
    call = getattr(app, "__call__", None)  # noqa: B004 - the method itself is what is checked
    return inspect.iscoroutinefunction(app) or inspect.iscoroutinefunction(call)
