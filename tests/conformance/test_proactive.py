"""Agents may speak first, with no message to answer, and keep speaking on a schedule."""

from __future__ import annotations

import asyncio

from aun_runtime import AUNAgent
from aun_runtime.testing import Recorder, Speaker

from .conftest import RuntimeFactory


async def test_an_agent_starts_a_conversation_nobody_asked_for(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("listener.local", Recorder)
    await runtime.register_agent(
        "herald.local", lambda: Speaker("good morning", to="listener.local"), eager=True
    )
    await runtime.start()
    await asyncio.sleep(0)
    await runtime.settle()

    listener = await runtime.agent_instance("listener.local", Recorder)
    [message] = listener.received
    assert message.text == "good morning"
    assert message.in_reply_to is None and message.hops == 0
    assert message.thread == message.message_id  # a new conversation


class Ticker(AUNAgent):
    """Posts a tick every few milliseconds, on its own."""

    def __init__(self) -> None:
        super().__init__("ticks")
        self.ticks = 0

    async def on_start(self) -> None:
        self.schedule(self.tick, every=0.002)

    async def tick(self) -> None:
        self.ticks += 1
        await self.send("listener.local", f"tick {self.ticks}")


async def test_scheduled_sends_repeat_until_the_runtime_stops(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("listener.local", Recorder)
    await runtime.register_agent("ticker.local", Ticker)  # overrides on_start: created at start
    await runtime.start()
    listener = await runtime.agent_instance("listener.local", Recorder)
    for _ in range(200):
        if len(listener.received) >= 3:
            break
        await asyncio.sleep(0.005)
    await runtime.stop()

    assert len(listener.received) >= 3
    assert [m.text for m in listener.received[:3]] == ["tick 1", "tick 2", "tick 3"]
    assert all(m.hops == 0 for m in listener.received)  # each tick is its own conversation
