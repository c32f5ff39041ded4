"""Applications for the ``aun-runtime run`` tests, loaded by import string in a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import os

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, UnknownAIDError, event


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
