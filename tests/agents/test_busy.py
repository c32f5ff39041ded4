"""Busy is visible: a held mailbox says what its turn waits for, since when, and what waits behind it.

The model is a real OpenAI-compatible server on loopback that is slow (a 2 s answer), or in a storm
(429 with Retry-After); the console's `GET /api/busy` serves the same snapshot.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import aiohttp

from agents.autonomous import AutonomousAgent
from aun_runtime import AgentBusy, AUNRuntime
from aun_runtime.console import Console
from aun_runtime.models import ModelConfig
from tests.models.openai_stand_in import Reply, ToolCalls, openai_stand_in

INFO = {"vision": False, "function_calling": True, "json_output": True, "family": "unknown",
        "structured_output": False, "multiple_system_messages": True}
ANSWER = ToolCalls([("reply", {"text": "done"})])


async def until(check: Callable[[], AgentBusy | None]) -> AgentBusy:
    async with asyncio.timeout(30):
        while (found := check()) is None:  # noqa: ASYNC110 - a snapshot has no event to wait on
            await asyncio.sleep(0.05)
    return found


def of(runtime: AUNRuntime, aid: str) -> AgentBusy | None:
    return next((b for b in runtime.busy() if b.aid == aid), None)


async def test_a_slow_model_shows_as_a_turn_waiting_for_it_with_the_mailbox_behind() -> None:
    release = threading.Event()

    def slow(body: dict[str, Any]) -> Reply:
        release.wait(20)
        return Reply(answer=ANSWER)

    with openai_stand_in(slow) as stand_in:
        model = ModelConfig(source="openai", model="slow", base_url=stand_in.base_url, model_info=INFO)
        runtime = AUNRuntime()
        await runtime.register_agent("bot.local", lambda: AutonomousAgent(model))
        human = await runtime.open_inbox("alice.local")
        await runtime.start()
        console = Console(runtime, port=0)
        await console.start()
        for n in range(3):
            await human.send("bot.local", f"question {n}")
        busy = await until(lambda: b if (b := of(runtime, "bot.local")) and b.waiting_for == "model"
                           and b.mailbox == 3 and (b.oldest_seconds or 0) >= 0.3 else None)
        assert busy.turn_seconds is not None and busy.turn_seconds >= busy.waiting_seconds >= 0  # type: ignore[operator]
        assert busy.attempt == 1 and busy.message_id is not None
        assert "waiting for model" in busy.describe() and "3 in mailbox" in busy.describe()
        async with aiohttp.ClientSession() as http, http.get(console.url + "api/busy") as response:
            served = await response.json()
        assert [b["aid"] for b in served] == ["bot.local"] and served[0]["waiting_for"] == "model"
        release.set()
        await asyncio.wait_for(runtime.settle(), timeout=60)
        assert of(runtime, "bot.local") is None  # idle again
        await console.stop()
        await runtime.close()


async def test_a_storm_shows_as_waiting_for_the_limiter() -> None:
    calm = threading.Event()

    def storm(body: dict[str, Any]) -> Reply:
        return Reply(answer=ANSWER) if calm.is_set() else Reply(status=429, headers={"Retry-After": "1"})

    with openai_stand_in(storm) as stand_in:
        model = ModelConfig(source="openai", model="stormy", base_url=stand_in.base_url, model_info=INFO)
        runtime = AUNRuntime()
        await runtime.register_agent("bot.local", lambda: AutonomousAgent(model))
        human = await runtime.open_inbox("alice.local")
        await runtime.start()
        await human.send("bot.local", "hello?")
        await until(lambda: b if (b := of(runtime, "bot.local")) and b.waiting_for == "model limiter" else None)
        calm.set()
        await asyncio.wait_for(runtime.settle(), timeout=60)
        assert runtime.stats.dead_letters == 0
        await runtime.close()
