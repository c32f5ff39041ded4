"""An inbox gives what was said: an agent's notes on its own tool use are there when asked for."""

from __future__ import annotations

from aun_runtime import (
    AUNAgent,
    AUNMessage,
    AUNRuntime,
    MessageContext,
    ToolCallPayload,
    ToolResultPayload,
    event,
)


class Pricer(AUNAgent):
    """Works a price out with its own tool, shows that it did, and says the price."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        await self.reply(ToolCallPayload(call_id="c1", name="calculator", arguments={"expression": "3 * 144"}))
        await self.reply(ToolResultPayload(call_id="c1", ok=True, result="432"))
        await self.reply("It comes to 432.")


async def test_replies_to_gives_what_was_said_and_the_annotations_when_asked() -> None:
    async with AUNRuntime() as runtime:
        await runtime.register_agent("pricer.local", Pricer)
        question = await runtime.send("pricer.local", "How much for three dozen dozen?")
        await runtime.settle()
        inbox = await runtime.open_inbox()
        # The README's idiom holds for an agent that uses a tool.
        assert [m.text for m in inbox.replies_to(question)] == ["It comes to 432."]
        everything = inbox.replies_to(question.message_id, annotations=True)
        assert [m.payload.type for m in everything] == ["tool_call", "tool_result", "text"]
        assert [m.is_annotation for m in everything] == [True, True, False]
        assert len(inbox.received) == 3  # nothing is dropped: the inbox keeps every message


async def test_next_passes_over_annotations_unless_asked() -> None:
    async with AUNRuntime() as runtime:
        await runtime.register_agent("pricer.local", Pricer)
        said = await runtime.open_inbox("said.local")
        noted = await runtime.open_inbox("noted.local")
        await said.send("pricer.local", "Price?")
        await noted.send("pricer.local", "Price?")
        await runtime.settle()
        first = await said.next(timeout=5)
        assert first is not None and first.text == "It comes to 432."
        assert await said.next(timeout=0.05) is None
        types = [(await noted.next(timeout=5, annotations=True)) for _ in range(3)]
        assert [m.payload.type for m in types if m is not None] == ["tool_call", "tool_result", "text"]
