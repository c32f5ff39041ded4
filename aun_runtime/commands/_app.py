"""Applications given by import string: what an app is, how one is loaded, and how it is run.

An application registers agents and groups on a started [`AUNRuntime`][aun_runtime.AUNRuntime]. The
commands (`run`, `worker`, `console`) load it by import string, so the library never imports
an application itself. It takes one of three forms:

* `async def app(runtime)`: it sets the run up and returns;
* `async def app(runtime): ...; yield; ...`: an async generator, whose code before `yield`
  sets the run up and whose code after it tears it down when the run ends, however it ends (a
  signal, `--for`, `--until-idle`, an error): the way an app owns what its agents use, such as a
  `McpWorkbench` (`async with McpWorkbench(...) as workbench: ...; yield`);
* a function returning an async context manager (`@contextlib.asynccontextmanager`), entered
  to set up and exited to tear down.

Any form may also hand cleanups to `runtime.on_stop(...)`. The teardown runs when the runtime
stops, after its last turn, within `DEFAULT_ON_STOP_TIMEOUT`. If the app raises,
in its set-up or its teardown, its traceback is printed on stderr at once and the command exits 1
(see `aun_runtime.operating._stopping`).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from ..operating._stopping import StopRequest

if TYPE_CHECKING:
    from ..api._runtime import AUNRuntime

__all__ = ["App", "AppRun", "load_app", "print_failure"]

App: TypeAlias = (
    "Callable[[AUNRuntime], Awaitable[None] | AsyncIterator[None] | AbstractAsyncContextManager[Any]]"
)

#: What an application must be, for the errors that say it is not.
_APP_SIGNATURE = (
    "an app is a coroutine function, `async def app(runtime: AUNRuntime) -> None`, that registers agents "
    "and groups on the started runtime it is given (write `async def`, not `def`), or an async generator "
    "`async def app(runtime): ...; yield; ...` whose code after `yield` tears the run down"
)


def load_app(spec: str) -> App:
    """Import `module:attribute` and return the application."""
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
    # A coroutine function, an async generator function (or a context manager made of one), a
    # partial of one, or an object whose __call__ is one of those.
    call = getattr(app, "__call__", None)  # noqa: B004 - the method itself is what is checked
    for candidate in (app, call):
        unwrapped = inspect.unwrap(candidate) if callable(candidate) else candidate
        if inspect.iscoroutinefunction(candidate) or inspect.isasyncgenfunction(unwrapped):
            return True
    return False


def print_failure(what: str, error: BaseException) -> None:
    """Print an application's failure on stderr, with its traceback from the app's own frames on, at once."""
    print(f"error: {what} raised {type(error).__name__}: {error}", file=sys.stderr, flush=True)
    frames = error.__traceback__
    while frames is not None and frames.tb_frame.f_code.co_filename in _OWN_FILES:
        frames = frames.tb_next  # the frames that ran the app are ours: the story starts in the app
    traceback.print_exception(type(error), error, frames, file=sys.stderr)
    sys.stderr.flush()


_OWN_FILES = frozenset({__file__, sys.modules[StopRequest.__module__].__file__})


class AppRun:
    """One application's life on a runtime: its set-up, its teardown, and whether it failed.

    Args:
        app: the application, in any of the forms the module describes.
        runtime: the started runtime it sets up.
    """

    def __init__(self, app: App, runtime: AUNRuntime) -> None:
        self.app = app
        self.runtime = runtime
        #: True once the app raised (set-up or teardown); its traceback has been printed.
        self.failed = False

    async def setup(self, stop: StopRequest) -> bool:
        """Set the run up, unless a signal asks to stop first.

        Returns:
            True if the set-up completed; False if it raised (printed) or a stop came first.
        """
        try:
            done, _ = await stop.unless_stopped(self._enter())
        except Exception as exc:
            self.failed = True
            print_failure("the app", exc)
            return False
        return done

    async def _enter(self) -> None:
        made = self.app(self.runtime)
        if inspect.isasyncgen(made):
            generator = made
            made = contextlib.asynccontextmanager(lambda: generator)()
        if isinstance(made, AbstractAsyncContextManager):
            await made.__aenter__()
            self.runtime.on_stop(lambda: self._teardown(cast(AbstractAsyncContextManager[Any], made)))
        elif inspect.isawaitable(made):
            await made
        else:
            raise TypeError(f"the app returned {type(made).__name__}: {_APP_SIGNATURE}")

    async def _teardown(self, context: AbstractAsyncContextManager[Any]) -> None:
        ended = False
        try:
            await context.__aexit__(None, None, None)
            ended = True
        except Exception as exc:
            print_failure("the app's teardown", exc)
        finally:
            if not ended:  # raised, or cancelled past its timeout (logged by the runtime)
                self.failed = True
