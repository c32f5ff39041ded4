"""The apps of the worker redrive test: bot.local (a model agent) on a worker that redrives its
retryable dead letters every half second, and alice.local, who asks bot one question."""

from __future__ import annotations

import asyncio

from autogen_core.tools import FunctionTool

from agents.autonomous import AutonomousAgent
from aun_runtime import AUNAgent, AUNRuntime, Budgets, TurnRetry
from aun_runtime.models import ModelConfig
from tests.agents.redrive_app import lookup

#: The redrive loops running (kept, so that they are not collected while they run).
LOOPS: set[asyncio.Task[None]] = set()


async def redrive_every(runtime: AUNRuntime, seconds: float) -> None:
    while True:
        await asyncio.sleep(seconds)
        await runtime.redrive()


async def bot(runtime: AUNRuntime) -> None:
    model = ModelConfig.from_env()
    tools = [FunctionTool(lookup, description="Look something up.")]
    # Each redriven try spends the thread's model calls: redriven every half second while the model
    # is down, the default budget (8 calls per thread) would be spent before the model is back.
    await runtime.register_agent(
        "bot.local", lambda: AutonomousAgent(model, tools=tools, annotate_tools=False, turn_retry=TurnRetry(1, 0.1)),
        budgets=Budgets(model_calls_per_thread=1_000),
    )
    LOOPS.add(asyncio.create_task(redrive_every(runtime, 0.5)))


class Alice(AUNAgent):
    async def on_start(self) -> None:
        await self.send("bot.local", "hello?")


async def alice(runtime: AUNRuntime) -> None:
    await runtime.register_agent("alice.local", Alice)
