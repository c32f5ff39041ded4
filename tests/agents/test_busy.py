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
from prometheus_client.parser import text_string_to_metric_families

from agents.autonomous import AutonomousAgent
from aun_runtime import AgentBusy, AUNRuntime
from aun_runtime.console import Console
from aun_runtime.models import ModelConfig
from aun_runtime.operating._metrics import RuntimeMetrics
from aun_runtime.operating._probes import ProbeServer, Readiness
from tests.models.openai_stand_in import OpenAIStandIn, Reply, ToolCalls, openai_stand_in

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


async def _started(stand_in: OpenAIStandIn) -> tuple[AUNRuntime, Any]:
    """A started runtime with bot.local, a model agent on the stand-in's model, and alice.local's inbox."""
    model = ModelConfig(source="openai", model="slow", base_url=stand_in.base_url, model_info=INFO)
    runtime = AUNRuntime()
    await runtime.register_agent("bot.local", lambda: AutonomousAgent(model))
    human = await runtime.open_inbox("alice.local")
    await runtime.start()
    return runtime, human


async def test_a_slow_model_shows_as_a_turn_waiting_for_it_with_the_mailbox_behind() -> None:
    release = threading.Event()

    def slow(body: dict[str, Any]) -> Reply:
        release.wait(20)
        return Reply(answer=ANSWER)

    with openai_stand_in(slow) as stand_in:
        runtime, human = await _started(stand_in)
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
        async with aiohttp.ClientSession() as http, http.get(console.url + "busy") as response:
            [probed] = (await response.json())["busy"]  # its probes' /busy says the same
        assert {k: probed[k] for k in ("aid", "waiting_for", "mailbox", "message_id")} == {
            k: served[0][k] for k in ("aid", "waiting_for", "mailbox", "message_id")}
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


async def test_the_probes_show_the_busy_agents_in_metrics_and_at_busy() -> None:
    release = threading.Event()

    def slow(body: dict[str, Any]) -> Reply:
        release.wait(20)
        return Reply(answer=ANSWER)

    with openai_stand_in(slow) as stand_in:
        runtime, human = await _started(stand_in)
        probes = ProbeServer("127.0.0.1:0", Readiness(), [])
        url = await probes.start()
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/busy") as response:
                assert response.status == 404  # no runtime yet: as a command before it opened one
            metrics = RuntimeMetrics(runtime)
            probes.add(metrics, busy=metrics.busy_report)
            for n in range(2):
                await human.send("bot.local", f"question {n}")
            await until(lambda: b if (b := of(runtime, "bot.local")) and b.waiting_for == "model"
                        and (b.turn_seconds or 0) >= 0.3 else None)
            async with http.get(f"{url}/busy") as response:
                [served] = (await response.json())["busy"]
            assert served["aid"] == "bot.local" and served["waiting_for"] == "model" and served["mailbox"] == 2
            async with http.get(f"{url}/metrics") as response:
                seen = {(s.name, tuple(s.labels.values())): s.value
                        for family in text_string_to_metric_families(await response.text()) for s in family.samples}
            assert seen[("aun_agents_busy", ())] == 1
            assert seen[("aun_turns_waiting", ("model",))] == 1 and seen[("aun_turns_waiting", ("tool",))] == 0
            assert seen[("aun_turn_longest_seconds", ())] >= 0.3
            assert seen[("aun_mailbox_oldest_seconds", ())] >= 0.3
            release.set()
            await asyncio.wait_for(runtime.settle(), timeout=60)
            async with http.get(f"{url}/busy") as response:
                assert await response.json() == {"busy": []}
        await probes.stop()
        await runtime.close()
