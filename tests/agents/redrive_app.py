"""The app of the redrive tests: three model agents and alice's inbox, the model from the environment."""

from __future__ import annotations

from autogen_core.tools import FunctionTool

from agents.autonomous import AutonomousAgent
from aun_runtime import AUNRuntime, TurnRetry
from aun_runtime.models import ModelConfig

AGENTS = ["bot0.local", "bot1.local", "bot2.local"]


async def lookup(query: str) -> str:
    """Look something up."""
    return "found it"


async def app(runtime: AUNRuntime) -> None:
    model = ModelConfig.from_env()
    tools = [FunctionTool(lookup, description="Look something up.")]
    for aid in AGENTS:
        await runtime.register_agent(
            aid,
            lambda: AutonomousAgent(model, tools=tools, annotate_tools=False, turn_retry=TurnRetry(2, 0.1)),
        )
    await runtime.open_inbox("alice.local")
