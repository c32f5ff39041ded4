"""A runtime stopped when idle and started again goes on delivering, on every core."""

from __future__ import annotations

import asyncio

from aun_runtime.testing import Recorder

from .conftest import RuntimeFactory

#: Seconds a settle may take here before it counts as hanging.
SETTLE_LIMIT = 20.0


async def test_a_runtime_stopped_and_started_again_delivers(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("rec.local", Recorder)
    await runtime.start()
    await runtime.send("rec.local", "before")
    await asyncio.wait_for(runtime.stop_when_idle(), SETTLE_LIMIT)

    await runtime.start()
    await runtime.send("rec.local", "after")
    await asyncio.wait_for(runtime.settle(), SETTLE_LIMIT)

    recorder = await runtime.agent_instance("rec.local", Recorder)
    assert [m.text for m in recorder.received] == ["before", "after"]
