"""An agent's description comes from the agent when its factory gives none: the console lists it."""

from __future__ import annotations

import aiohttp

from agents.autonomous import AutonomousAgent
from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, event
from aun_runtime.console import Console
from aun_runtime.models import ScriptedChatCompletionClient


class Clerk(AUNAgent):
    """Files what it is sent, and says nothing."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.think("filed")


def _descriptions(runtime: AUNRuntime) -> dict[str, str]:
    return {entry.aid: entry.description for entry in runtime.archive.agents()}


async def test_a_lambda_factory_leaves_the_description_to_the_agent_it_makes() -> None:
    model = ScriptedChatCompletionClient(lambda request: "nothing to say")
    async with AUNRuntime() as runtime:
        await runtime.register_agent("model.local", lambda: AutonomousAgent(model))
        await runtime.register_agent("clerk.local", lambda: Clerk())
        await runtime.register_agent("named.local", lambda: Clerk(), description="the filing desk")
        await runtime.send("model.local", "hello")
        await runtime.send("clerk.local", "a form")
        await runtime.send("named.local", "a form")
        await runtime.settle()
        console = Console(runtime, poll_interval=0.02)
        await console.start()
        try:
            async with aiohttp.ClientSession() as http, http.get(f"{console.url.rstrip('/')}/api/agents") as response:
                listed = {agent["aid"]: agent["description"] for agent in await response.json()}
        finally:
            await console.stop()
        info = runtime.agent_info("model.local")
    # The instance's own description (AutonomousAgent gives one), else its class docstring's first line;
    # a description given at registration stays.
    default = "a model-backed agent that thinks, and speaks through its send tools"
    assert info["description"] == default
    expected = {"model.local": default, "clerk.local": "Files what it is sent, and says nothing.",
                "named.local": "the filing desk"}
    assert {aid: _descriptions(runtime)[aid] for aid in expected} == expected
    assert {aid: listed[aid] for aid in expected} == expected
