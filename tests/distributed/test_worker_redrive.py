"""Redrive on a distributed worker: `runtime.redrive()` in a running worker delivers its retryable
dead letters again through the host, and what the failed turn already sent is not sent twice.

A real host and two workers over gRPC on loopback (in this test's process): bot.local on w1, whose
model (a real OpenAI-compatible server on loopback) goes down after bot's first round, in which it
already said "part one"; alice.local on w2. The model back, w1 redrives: alice has each part once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autogen_core.tools import FunctionTool

from agents.autonomous import AutonomousAgent
from aun_runtime import AUNRuntime, RecordKind, TurnRetry
from aun_runtime.distributed import AUNHost, worker_runtime
from aun_runtime.models import ModelConfig
from tests.agents.redrive_app import lookup
from tests.models.openai_stand_in import Reply, ToolCalls, openai_stand_in

INFO = {"vision": False, "function_calling": True, "json_output": True, "family": "unknown",
        "structured_output": False, "multiple_system_messages": True}


class Model:
    """The first round says "part one" and looks something up; the second says "part two" unless `down`."""

    def __init__(self) -> None:
        self.down = threading.Event()
        self.down.set()

    def __call__(self, body: dict[str, Any]) -> Reply | ToolCalls:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return ToolCalls([("reply", {"text": "part one"}), ("lookup", {"query": "x"})])
        return Reply(status=503) if self.down.is_set() else ToolCalls([("reply", {"text": "part two"})])


async def until(check: Callable[[], bool], what: str) -> None:
    async with asyncio.timeout(60):
        while not check():  # noqa: ASYNC110 - the worker's archive has no event to wait on
            await asyncio.sleep(0.05)


def heard(alice: AUNRuntime) -> list[str]:
    alice.archive.flush()
    return [r.text or "" for r in alice.archive.history("alice.local", kinds=[RecordKind.RECEIVED])]


async def test_a_running_worker_redrives_its_dead_letters_and_nothing_is_said_twice(tmp_path: Path) -> None:
    model = Model()
    host = AUNHost("127.0.0.1:0")
    await host.open()
    with openai_stand_in(model) as stand_in:
        config = ModelConfig(source="openai", model="stand-in", base_url=stand_in.base_url, model_info=INFO,
                             max_retries=0, backoff=0.01)
        tools = [FunctionTool(lookup, description="Look something up.")]
        w1 = worker_runtime(host.address, archive=str(tmp_path / "w1.sqlite"), name="w1")
        w2 = worker_runtime(host.address, archive=str(tmp_path / "w2.sqlite"), name="w2")
        try:
            await w1.register_agent("bot.local", lambda: AutonomousAgent(
                config, tools=tools, annotate_tools=False, turn_retry=TurnRetry(1, 0.05)))
            alice = await w2.open_inbox("alice.local")
            await w1.start()
            await w2.start()
            await alice.send("bot.local", "hello?")
            await until(lambda: w1.stats.dead_letters == 1, "bot's dead letter")
            await until(lambda: heard(w2) == ["part one"], "the first part")
            [dead] = w1.archive.dead_letters()
            assert (dead.reason or "").startswith("retryable: ModelUnavailableError")

            model.down.clear()
            assert [r.id for r in await w1.redrive()] == [dead.id]
            await until(lambda: len(heard(w2)) >= 2, "the second part")
            await until(lambda: w2.stats.duplicates >= 1, "the repeat dropped")
            await asyncio.sleep(0.5)  # anything said twice would have come by now
            assert heard(w2) == ["part one", "part two"]
            assert w2.stats.duplicates == 1  # the redriven turn's "part one", under the id it had
            assert await w1.redrive() == []  # closed: redriven once
            assert w1.stats.dead_letters == 1
        finally:
            await w1.close()
            await w2.close()
            await host.stop()
