"""Applications for the ``aun-runtime run`` tests, loaded by import string in a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, UnknownAIDError, event
from aun_runtime.testing import Replier


class Clock(AUNAgent):
    """Says the time to app.local every half second."""

    def __init__(self) -> None:
        super().__init__("ticks")
        self.ticks = 0

    async def on_start(self) -> None:
        self.schedule(self.tick, delay=0.1, every=0.5)

    async def tick(self) -> None:
        self.ticks += 1
        await self.send("app.local", f"tick {self.ticks}")


async def clock(runtime: AUNRuntime) -> None:
    await runtime.open_inbox()
    await runtime.register_agent("clock.local", Clock)


async def dead_letter(runtime: AUNRuntime) -> None:
    """Sends to an AID nobody registered."""
    await runtime.open_inbox()
    with contextlib.suppress(UnknownAIDError):  # recorded as a dead letter
        await runtime.send("nobody.local", "anyone there?")


async def quiet(runtime: AUNRuntime) -> None:
    """Nothing goes wrong."""
    await runtime.open_inbox()


# -- how runs end (tests/commands/test_stopping.py) --------------------------------------------------------


class Hanging(AUNAgent):
    """Never returns from a message with ``trigger`` in it, and says so on stdout; answers others."""

    def __init__(self, trigger: str) -> None:
        super().__init__("hangs on purpose")
        self.trigger = trigger

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        if self.trigger in (message.text or ""):
            print("handler stuck", flush=True)
            await asyncio.Event().wait()
        await self.reply(f"answered: {message.text}")


async def stuck(runtime: AUNRuntime) -> None:
    """``stuck.local`` never returns from ``hang`` (``STUCK_TRIGGER``), which is sent to it at start
    unless ``STUCK_SEND=0``."""
    trigger = os.environ.get("STUCK_TRIGGER", "hang")
    await runtime.register_agent("stuck.local", lambda: Hanging(trigger))
    inbox = await runtime.open_inbox("app.local")
    if os.environ.get("STUCK_SEND", "1") == "1":
        await inbox.send("stuck.local", "hang")


MCP_SERVER = Path(__file__).resolve().parents[1] / "agents" / "mcp_server.py"


def _mark(text: str) -> None:
    with open(os.environ["APP_MARKER"], "a") as marker:
        marker.write(text + "\n")


async def owned(runtime: AUNRuntime) -> AsyncIterator[None]:
    """Owns a resource for the run (an async generator app): set up before ``yield``, torn down
    after it, recorded in ``APP_MARKER``; raises in its set-up when ``APP_RAISE=1``."""
    await runtime.register_agent("replier.local", Replier)
    runtime.on_stop(lambda: _mark("on_stop ran"))
    _mark("set up")
    try:
        if os.environ.get("APP_RAISE") == "1":
            raise RuntimeError("the app failed on purpose")
        print("app ready", flush=True)
        yield
    finally:
        _mark("torn down")


async def mcp_then_raise(runtime: AUNRuntime) -> None:
    """Starts a real MCP server through a ``McpWorkbench`` (and never stops it), then raises."""
    import psutil
    from autogen_ext.tools.mcp import McpWorkbench, StdioServerParams

    server = MCP_SERVER
    params = StdioServerParams(command=sys.executable, args=[str(server), os.environ["MCP_TAG"]], read_timeout_seconds=10)
    workbench = McpWorkbench(params)
    await workbench.start()
    tools = [tool["name"] for tool in await workbench.list_tools()]
    [child] = [p for p in psutil.Process().children(recursive=True) if os.environ["MCP_TAG"] in p.cmdline()]
    print(f"tools: {tools} from the MCP server with pid {child.pid}", flush=True)
    raise RuntimeError("the app failed after starting its workbench")


async def thread_then_raise(runtime: AUNRuntime) -> None:
    """Starts a thread that never ends (the interpreter would wait for it at exit), then raises."""
    import threading

    threading.Thread(target=threading.Event().wait, name="app-thread", daemon=False).start()
    raise RuntimeError("the app failed after starting a thread")
class Slow(AUNAgent):
    """Answers each job, after `AUN_TEST_DELAY` seconds."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        await asyncio.sleep(float(os.environ.get("AUN_TEST_DELAY", "0")))
        await self.reply(f"done: {message.text}")


async def slow_jobs(runtime: AUNRuntime) -> None:
    """Three jobs for a slow agent, from app.local."""
    await runtime.register_agent("slow.local", Slow)
    for number in range(3):
        await runtime.send("slow.local", f"job {number}")


# -- a handler that holds the interpreter (tests/commands/test_stopping.py) ---------------------------------


class HoldingTheInterpreter(AUNAgent):
    """Runs one call of C code for hours, holding the interpreter lock all along: a regular
    expression that backtracks (it runs Python's signal handlers now and then), or a sum over a
    range (it never does)."""

    def __init__(self, how: str) -> None:
        super().__init__("holds the interpreter")
        self.how = how

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        print("handler stuck", flush=True)
        if self.how == "regex":
            re.match(r"(a+)+$", "a" * 34 + "b")  # 2**34 ways to fail: hours
        else:
            sum(range(10**13))  # days


async def backtracking(runtime: AUNRuntime) -> None:
    """``stuck.local`` is sent a message at start, and is held by its regular expression from then on."""
    await _held(runtime, "regex")


async def summing(runtime: AUNRuntime) -> None:
    """``stuck.local`` is sent a message at start, and is held by its sum from then on."""
    await _held(runtime, "sum")


async def _held(runtime: AUNRuntime, how: str) -> None:
    await runtime.register_agent("stuck.local", lambda: HoldingTheInterpreter(how))
    inbox = await runtime.open_inbox("app.local")
    await inbox.send("stuck.local", "go")
