"""Apps for the operating tests: a model agent on the model the environment names (AUN_MODEL)."""

from __future__ import annotations

import logging
import warnings

from agents.observer import ObserverAgent
from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, event
from aun_runtime.models import model_client_from_env


async def model_team(runtime: AUNRuntime) -> None:
    """An observer on the configured model, asked one question by an inbox."""
    model = model_client_from_env()
    await runtime.register_agent("observer.local", lambda: ObserverAgent(model, persona="You answer briefly."))
    inbox = await runtime.open_inbox("asker.local")
    await inbox.send("observer.local", "Is the service up?")


class Logs(AUNAgent):
    """Logs a line in each turn (the JSON line carries its AID, thread and message id)."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        logging.getLogger("team").warning("handling %s", message.text)


async def logging_team(runtime: AUNRuntime) -> None:
    """An agent that logs in its turn, a Python warning, and one message to it."""
    warnings.warn("this app is deprecated", DeprecationWarning, stacklevel=1)
    await runtime.register_agent("logs.local", Logs)
    inbox = await runtime.open_inbox("asker.local")
    await inbox.send("logs.local", "first")


class Relay(AUNAgent):
    """Passes what an inbox asks on to the observer on the other worker; keeps the answer."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        if message.from_aid == "asker.local":
            await self.send("observer.local", message.text or "")


async def asking_side(runtime: AUNRuntime) -> None:
    """One worker of two: a relay, and an inbox that asks it once the other worker holds the observer."""
    await runtime.register_agent("relay.local", Relay)
    inbox = await runtime.open_inbox("asker.local")
    await inbox.send("relay.local", "Is the service up?")


async def model_side(runtime: AUNRuntime) -> None:
    """The other worker: the observer on the configured model."""
    model = model_client_from_env()
    await runtime.register_agent("observer.local", lambda: ObserverAgent(model, persona="You answer briefly."))
