"""`StopCallbacks`: what an application asked to have done when its runtime stops.

An application often opens things its agents use for as long as the runtime runs: an MCP server
behind a `McpWorkbench`, an HTTP client, a database pool. `runtime.on_stop(workbench.stop)`
ties such a thing to the run: the callback runs once, when the runtime stops, however it stops
(`stop`, `stop_when_idle`, `close`, leaving `async with`, or a command that ends on a signal,
at the end of `--for` or `--until-idle`, or on an error), and only after the last turn has ended,
so no agent is still using what it closes.

* Callbacks run last registered first (what was opened last is closed first), each once.
* Each gets `DEFAULT_ON_STOP_TIMEOUT` seconds (or its own `timeout`): one still running then
  is cancelled, and one that raises is logged with its traceback; either way the others still run
  and the stop goes on. A stop never hangs on a callback, and never raises one's error.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

__all__ = ["DEFAULT_ON_STOP_TIMEOUT", "StopCallback", "StopCallbacks"]

logger = logging.getLogger("aun_runtime")

#: Seconds one stop callback may take. Closing a workbench stops its MCP server process (the MCP
#: client gives a server two seconds to exit before it terminates it); a pool or an HTTP client
#: closes in well under a second. A callback still running after this is cancelled and logged.
DEFAULT_ON_STOP_TIMEOUT = 3.0

#: A callback: a coroutine function (or any function returning an awaitable), or a plain function.
StopCallback: TypeAlias = Callable[[], Awaitable[Any] | Any]


class StopCallbacks:
    """The callbacks one runtime runs when it stops."""

    __slots__ = ("_callbacks",)

    def __init__(self) -> None:
        self._callbacks: list[tuple[StopCallback, float]] = []

    def add(self, callback: StopCallback, timeout: float) -> None:
        if not callable(callback):
            raise TypeError(f"on_stop needs a callable, got {type(callback).__name__}")
        if timeout <= 0:
            raise ValueError("an on_stop timeout must be positive")
        self._callbacks.append((callback, timeout))

    async def run(self) -> None:
        """Run (and forget) every callback, last registered first."""
        while self._callbacks:
            callback, timeout = self._callbacks.pop()
            name = getattr(callback, "__qualname__", repr(callback))
            scope = asyncio.timeout(timeout)
            try:
                async with scope:
                    result = callback()
                    if inspect.isawaitable(result):
                        await result
            except Exception:
                if scope.expired():
                    logger.error("the on_stop callback %s took more than %g s: cancelled", name, timeout)
                else:
                    logger.exception("the on_stop callback %s raised", name)
