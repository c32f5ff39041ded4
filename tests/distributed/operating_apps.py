"""Apps for the operating tests: a model agent on the model the environment names (AUN_MODEL)."""

from __future__ import annotations

from agents.observer import ObserverAgent
from aun_runtime import AUNRuntime
from aun_runtime.models import model_client_from_env


async def model_team(runtime: AUNRuntime) -> None:
    """An observer on the configured model, asked one question by an inbox."""
    model = model_client_from_env()
    await runtime.register_agent("observer.local", lambda: ObserverAgent(model, persona="You answer briefly."))
    inbox = await runtime.open_inbox("asker.local")
    await inbox.send("observer.local", "Is the service up?")
