"""`LocalTools`: a model agent's own tools, each call bounded in time.

The tools are autogen-core tools (run through a `StaticWorkbench`) or any `Workbench`, such as
autogen-ext's `McpWorkbench` for an MCP server. A call that takes longer than the timeout is
given up on: the model is told it timed out (an error result), and the turn goes on.

How a call is given up on depends on the workbench. A `StaticWorkbench`'s call runs in the turn's
own task and is cancelled. Any other workbench's call runs in a task of its own that is let go
rather than cancelled: autogen-ext's `McpWorkbench` (0.7.5) answers each request through a future
its session actor completes, and a request cancelled before the actor answers crashes the actor,
and with it the workbench of every agent that shares it. A call let go ends by itself within the
MCP session's own `read_timeout_seconds`; what it returns then is dropped. The same holds when the
turn itself is cancelled (its handler timeout, or the runtime stopping) during a call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from autogen_core import CancellationToken
from autogen_core.tools import BaseTool, StaticWorkbench, ToolSchema, Workbench

from aun_runtime.models import tool_span

__all__ = ["DEFAULT_TOOL_TIMEOUT", "LocalTools"]

T = TypeVar("T")

#: Seconds one local tool call may take. A tool looks something up or computes something for the
#: model: seconds, or tens of seconds for a slow web API. A minute leaves room for that, and a turn
#: of a few rounds still ends well inside the runtime's default handler timeout (five minutes).
DEFAULT_TOOL_TIMEOUT = 60.0


class LocalTools:
    """The tools of one agent, and how long each call may take.

    Args:
        workbench: the workbench the tools run in.
        timeout: seconds one call may take (None: no limit of its own; the turn's handler timeout
            still holds).
    """

    def __init__(self, workbench: Workbench, *, timeout: float | None) -> None:
        if timeout is not None and not timeout > 0:
            raise ValueError("tool_timeout is a positive number of seconds, or None")
        self.workbench = workbench
        self.timeout = timeout
        self._schemas: list[ToolSchema] | None = None
        self._let_go: set[asyncio.Task[Any]] = set()  # calls given up on that are still running

    @classmethod
    def of(cls, tools: Sequence[BaseTool[Any, Any]] | Workbench | None, *, timeout: float | None) -> LocalTools | None:
        """The tools given to an agent (a workbench, or a list of tools), or None for none."""
        if isinstance(tools, Workbench):
            return cls(tools, timeout=timeout)
        return cls(StaticWorkbench(list(tools)), timeout=timeout) if tools else None

    async def schemas(self, keep: Callable[[ToolSchema], bool]) -> list[ToolSchema]:
        """The tools' schemas that `keep` accepts, listed once (an MCP server is asked once)."""
        if self._schemas is None:
            # No timeout of its own: an MCP server's first listing waits for the server to start.
            listed = await self._run(lambda: self.workbench.list_tools(), None)
            self._schemas = [schema for schema in listed if keep(schema)]
        return self._schemas

    async def call(self, name: str, arguments: dict[str, Any], call_id: str) -> tuple[str, bool]:
        """Run one tool: its result as text, and whether it failed (raised, or timed out); traced
        as an `execute_tool` span of the turn."""
        with tool_span(name) as span:
            text, failed = await self._call(name, arguments, call_id)
            if failed:
                span.set_attribute("error.type", text.partition(":")[0] if ":" in text else "ToolError")
            return text, failed

    async def _call(self, name: str, arguments: dict[str, Any], call_id: str) -> tuple[str, bool]:
        token = CancellationToken()
        try:
            result = await self._run(lambda: self.workbench.call_tool(name, arguments, token, call_id=call_id), self.timeout)
        except TimeoutError:
            if isinstance(self.workbench, StaticWorkbench):
                # What a tool runs beside the turn (a function's thread) is told too. Not so for
                # McpWorkbench, which links its token to a coroutine that cannot be cancelled so.
                token.cancel()
            return f"TimeoutError: the tool {name} timed out after {self.timeout:g} s (tool_timeout)", True
        except Exception as exc:  # a tool that raises is an outcome the model should see, not a crash
            return f"{type(exc).__name__}: {exc}", True
        return result.to_text(replace_image="<image>"), result.is_error

    async def _run(self, work: Callable[[], Awaitable[T]], timeout: float | None) -> T:
        if isinstance(self.workbench, StaticWorkbench):
            async with asyncio.timeout(timeout):
                return await work()
        task = asyncio.ensure_future(work())
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout)
        except asyncio.CancelledError:
            self._give_up(task)
            raise
        if not done:
            self._give_up(task)
            raise TimeoutError
        return task.result()

    def _give_up(self, task: asyncio.Task[Any]) -> None:
        self._let_go.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[Any]) -> None:
        self._let_go.discard(task)
        if not task.cancelled():
            task.exception()  # whatever it ended with, nobody waits for it any more
