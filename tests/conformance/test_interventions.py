"""autogen-core intervention handlers on every core: on_publish observes, changes and drops what is
published; a drop is a dead letter and never makes the runtime hang; send-side-only handlers are
refused with a reason."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from autogen_core import AgentId, DefaultInterventionHandler, DropMessage, MessageContext

from aun_runtime import AUNMessage, InterventionHandlerError
from aun_runtime.testing import Recorder

from .conftest import RuntimeFactory

#: Seconds a settle may take here: far more than any of these runs needs, so hanging (as
#: autogen-core's stop_when_idle does after a drop) fails the test instead of stalling the suite.
SETTLE_LIMIT = 20.0


def _with_text(message: AUNMessage, text: str) -> AUNMessage:
    return message.model_copy(update={"payload": message.payload.model_copy(update={"text": text})})


class Observer(DefaultInterventionHandler):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, bool]] = []

    async def on_publish(self, message: Any, *, message_context: MessageContext) -> Any:
        assert message_context.topic_id is not None and not message_context.is_rpc
        self.seen.append((message.text, message_context.topic_id.type, message_context.message_id == message.message_id))
        return message


class Shout(DefaultInterventionHandler):
    async def on_publish(self, message: Any, *, message_context: MessageContext) -> Any:
        return _with_text(message, message.text.upper())


class Exclaim(DefaultInterventionHandler):
    def __init__(self) -> None:
        self.given: list[str] = []

    async def on_publish(self, message: Any, *, message_context: MessageContext) -> Any:
        self.given.append(message.text)
        return _with_text(message, message.text + "!")


class DropSecrets(DefaultInterventionHandler):
    async def on_publish(self, message: Any, *, message_context: MessageContext) -> Any:
        return DropMessage if message.text.startswith("secret") else message


class Explodes(DefaultInterventionHandler):
    async def on_publish(self, message: Any, *, message_context: MessageContext) -> Any:
        if message.text == "boom":
            raise ValueError("the filter broke")
        return message


class ForgetsToReturn(DefaultInterventionHandler):
    async def on_publish(self, message: Any, *, message_context: MessageContext) -> Any:
        return None


async def _texts_received(runtime: Any, aid: str) -> list[str]:
    recorder = await runtime.agent_instance(aid, Recorder)
    return [m.text for m in recorder.received]


async def test_on_publish_sees_every_message_with_its_context(make_runtime: RuntimeFactory) -> None:
    observer = Observer()
    runtime = await make_runtime(core_options={"intervention_handlers": [observer]})
    await runtime.register_agent("rec.local", Recorder)
    await runtime.start()
    await runtime.send("rec.local", "one")
    await runtime.send("rec.local", "two")
    await asyncio.wait_for(runtime.settle(), SETTLE_LIMIT)

    assert observer.seen == [("one", "aun.inbox.rec.local", True), ("two", "aun.inbox.rec.local", True)]
    assert await _texts_received(runtime, "rec.local") == ["one", "two"]


async def test_handlers_change_a_message_in_turn_each_seeing_the_one_before(make_runtime: RuntimeFactory) -> None:
    exclaim = Exclaim()
    runtime = await make_runtime(core_options={"intervention_handlers": [Shout(), exclaim]})
    await runtime.register_agent("rec.local", Recorder)
    await runtime.start()
    await runtime.send("rec.local", "hello")
    await asyncio.wait_for(runtime.settle(), SETTLE_LIMIT)

    assert exclaim.given == ["HELLO"]
    assert await _texts_received(runtime, "rec.local") == ["HELLO!"]


async def test_a_dropped_message_reaches_nobody_is_a_dead_letter_and_nothing_hangs(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(core_options={"intervention_handlers": [DropSecrets()]})
    await runtime.register_agent("rec.local", Recorder)
    await runtime.start()
    secret = await runtime.send("rec.local", "secret plan")
    await runtime.send("rec.local", "public news")
    await asyncio.wait_for(runtime.settle(), SETTLE_LIMIT)

    assert await _texts_received(runtime, "rec.local") == ["public news"]
    [dead] = runtime.archive.dead_letters()
    assert (dead.owner, dead.message) == ("rec.local", secret)
    assert "MessageDroppedError" in (dead.reason or "") and "DropSecrets" in (dead.reason or "")
    await asyncio.wait_for(runtime.stop_when_idle(), SETTLE_LIMIT)


async def test_a_dropped_group_message_is_a_dead_letter_for_each_member(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(core_options={"intervention_handlers": [DropSecrets()]})
    for aid in ("ana.local", "ben.local", "cy.local"):
        await runtime.register_agent(aid, Recorder)
    await runtime.create_group("crew", ["ana.local", "ben.local", "cy.local"])
    await runtime.start()
    await runtime.group_send("crew", "secret handshake", sender="ana.local")
    await runtime.group_send("crew", "hello all", sender="ana.local")
    await asyncio.wait_for(runtime.settle(), SETTLE_LIMIT)

    assert await _texts_received(runtime, "ben.local") == ["hello all"]
    assert await _texts_received(runtime, "cy.local") == ["hello all"]
    assert sorted(d.owner for d in runtime.archive.dead_letters()) == ["ben.local", "cy.local"]


async def test_a_handler_that_raises_drops_the_message_says_so_and_the_sender_goes_on(
    make_runtime: RuntimeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = await make_runtime(core_options={"intervention_handlers": [Explodes()]})
    await runtime.register_agent("rec.local", Recorder)
    await runtime.start()
    with caplog.at_level(logging.ERROR, logger="aun_runtime"):
        await runtime.send("rec.local", "boom")  # raises nothing: the sender did nothing wrong
        await runtime.send("rec.local", "after")
        await asyncio.wait_for(runtime.settle(), SETTLE_LIMIT)

    assert await _texts_received(runtime, "rec.local") == ["after"]
    [dead] = runtime.archive.dead_letters()
    assert "Explodes raised: ValueError: the filter broke" in (dead.reason or "")
    assert any("intervention handler Explodes raised" in r.getMessage() for r in caplog.records)


async def test_a_handler_returning_none_is_warned_about_and_changes_nothing(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(core_options={"intervention_handlers": [ForgetsToReturn()]})
    await runtime.register_agent("rec.local", Recorder)
    await runtime.start()
    with pytest.warns(RuntimeWarning, match="ForgetsToReturn.on_publish returned None"):
        await runtime.send("rec.local", "kept")
    await asyncio.wait_for(runtime.settle(), SETTLE_LIMIT)

    assert await _texts_received(runtime, "rec.local") == ["kept"]


class OnlySend(DefaultInterventionHandler):
    async def on_send(self, message: Any, *, message_context: MessageContext, recipient: AgentId) -> Any:
        return DropMessage


class OnlyResponse:
    """Structural, as autogen-core's protocol allows: no base class at all."""

    async def on_response(self, message: Any, *, sender: AgentId, recipient: AgentId | None) -> Any:
        return message


@pytest.mark.parametrize(("handler", "says"), [(OnlySend(), "implements only on_send"), (OnlyResponse(), "implements only on_response")])
async def test_a_handler_with_only_send_side_hooks_is_refused_and_told_why(
    make_runtime: RuntimeFactory, handler: object, says: str
) -> None:
    with pytest.raises(InterventionHandlerError, match=says) as refused:
        await make_runtime(core_options={"intervention_handlers": [Observer(), handler]})
    assert "send_message is refused" in str(refused.value)
    assert "Implement on_publish" in str(refused.value)
