"""Small agents that show the autonomous semantics: answering several times, staying silent."""

from __future__ import annotations

from aun_runtime import AUNAgent, AUNMessage, MessageContext, event

__all__ = ["EchoTwice", "Quiet"]


class EchoTwice(AUNAgent):
    """Answers every direct message twice: once at once, once more with a second thought."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        if message.group_id is not None and not message.mentions_aid(self.aid):
            return  # in a group it answers only when asked
        # In a group, name the asker: in a mention-mode group nobody else would see the answer.
        asker = [message.from_aid] if message.group_id is not None else None
        await self.reply(f"I heard: {message.text}", mentions=asker)
        self.think("one answer is enough, but a follow-up is allowed")
        await self.reply("…and one more thing: replies are acts, not return values.", mentions=asker)


class Quiet(AUNAgent):
    """Reads everything, records what it thinks, answers nothing. Silence is a legal answer."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.think(f"noted {message.text!r} from {message.from_aid}; nothing to add")
