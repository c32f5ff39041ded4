"""Applications for the ``aun-runtime run`` tests, loaded by import string in a subprocess."""

from __future__ import annotations

import contextlib

from aun_runtime import AUNAgent, AUNRuntime, UnknownAIDError


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
