"""`ObserverAgent`: a group-chat member that reads everything and speaks only when it should.

The code layer (this class) and the model share the work, as the observer protocol says
(`protocols.observer`):

* The code drops the agent's own messages (a gateway may echo them back) and, when `allow_from` is
  given, messages from anyone else, before any model call. Everything else goes to the model, with
  the recent conversation of the group from the archive: there is no `@mention` check in a
  `broadcast` group.
* In a `mention` group the runtime's channel already keeps unaddressed messages from the agent (so
  they cost no model call) and archives them; the next message that does name the agent brings them
  along as context.
* Before any model call, the code asks the runtime's budgets whether an answer could go out at all
  (an observer that overheard a thread and already spoke in it may not speak again there): if not,
  no model call is made, and the message waits in the archive as context for the next turn.
* The model answers `__SILENT__` (the decision is archived as a thought, nothing is sent),
  `__REPLY__` + text (the marker is stripped, the text is sent), or plain text (sent). Markers are
  read forgivingly and never leak (see `protocols.observer.parse_observer_output`).
* With `stream=True` the output is read as it streams, and a silent answer is cut off as soon as
  the marker is complete: no tokens are spent on text nobody will see.
"""

from __future__ import annotations

from collections.abc import Iterable

from autogen_core.models import CreateResult, LLMMessage, SystemMessage, UserMessage

from aun_runtime import (
    DEFAULT_TURN_RETRY,
    ArchiveRecord,
    AUNAgent,
    AUNMessage,
    MessageContext,
    RecordKind,
    TurnRetry,
    event,
)
from protocols.observer import (
    ObserverDecision,
    ObserverOutput,
    ObserverStreamParser,
    observer_system_prompt,
    parse_observer_output,
)

from ._context import addressing
from ._model_calls import ModelLike, result_text, speaker_name, use_model

__all__ = ["DEFAULT_CONTEXT_MESSAGES", "MAX_CONTEXT_CHARS", "ObserverAgent"]

#: Earlier messages shown to the model with each new one. Enough for a thread of talk; older context
#: costs tokens on every call of every observer.
DEFAULT_CONTEXT_MESSAGES = 20
#: Each context message is cut to this many characters, so one long paste cannot crowd out the rest.
MAX_CONTEXT_CHARS = 1_000

_CONTEXT_KINDS = (RecordKind.RECEIVED, RecordKind.FILTERED, RecordKind.SENT)


class ObserverAgent(AUNAgent):
    """Observes a group chat and decides, message by message, whether to speak.

    Args:
        model: the model client, or a [`ModelConfig`][aun_runtime.models.ModelConfig] to build one from.
        persona: who the agent is and what it knows, added to the observer prompt.
        allow_from: if given, only messages from these AIDs reach the model; others are archived and
            noted, never answered.
        context_messages: how many earlier messages of the conversation the model sees.
        stream: read the model's output as a stream and stop a silent one early.
        turn_retry: how a turn that failed for a passing cause (its model rate-limited or down) is
            tried again before its message is a retryable dead letter (None: not tried again).
    """

    def __init__(
        self,
        model: ModelLike,
        *,
        persona: str = "",
        allow_from: Iterable[str] | None = None,
        context_messages: int = DEFAULT_CONTEXT_MESSAGES,
        stream: bool = False,
        turn_retry: TurnRetry | None = DEFAULT_TURN_RETRY,
    ) -> None:
        super().__init__("observes the group and speaks only when it should")
        self.model = use_model(model)
        self.turn_retry = turn_retry
        self.persona = persona
        self.allow_from = frozenset(allow_from) if allow_from is not None else None
        self.context_messages = context_messages
        self.stream = stream
        #: Model calls made so far, and the last request's messages: what the model was shown.
        self.model_calls = 0
        self.last_request: list[LLMMessage] = []

    @event
    async def on_chat(self, message: AUNMessage, ctx: MessageContext) -> None:
        if message.from_aid == self.aid:
            return  # its own message, echoed back: never an occasion to speak
        if self.allow_from is not None and message.from_aid not in self.allow_from:
            self.think(f"not answering {message.from_aid}: not on the allow-list")
            return
        if message.text is None:
            self.think(f"nothing to read in a {message.payload.type} payload from {message.from_aid}")
            return
        refusal = self.aun.ledger.reply_refusal(self.aid, message)
        if refusal is not None:  # no answer could go out: the message is context for a later turn
            self.think(f"not answering {message.from_aid}: {refusal}")
            return
        output = await self._ask_model(self.model_messages(message))
        if output.decision is ObserverDecision.SILENT:
            reason = f": {output.note}" if output.note else ""
            self.think(f"silent on {message.from_aid}'s message{reason}")
            return
        await self.reply(output.text)  # in a mention group, reply() names the one being answered

    def model_messages(self, message: AUNMessage) -> list[LLMMessage]:
        """What the model is shown: the observer prompt, the recent conversation, the new message."""
        if message.group_id is not None:
            records = self.history(
                group_id=message.group_id, kinds=_CONTEXT_KINDS, limit=self.context_messages + 1
            )
            where = f'group "{message.group_id}"'
        else:
            records = self.history(
                peer=message.from_aid, kinds=_CONTEXT_KINDS, limit=self.context_messages + 1
            )
            where = "a direct conversation"
        earlier = [r for r in records if not _is(r, message)][-self.context_messages :]
        lines = [self._context_line(record) for record in earlier if record.message is not None]
        context = (
            f"Recent messages in {where} (oldest first):\n" + "\n".join(lines)
            if lines
            else f"No earlier messages in {where}."
        )
        prompt = (
            f"{context}\n\nNew message from {message.from_aid} in {where}, "
            f"addressed {addressing(message, self.aid)}:\n{message.text}"
        )
        return [
            SystemMessage(content=observer_system_prompt(self.aid, self.persona)),
            UserMessage(content=prompt, source=speaker_name(message.from_aid)),
        ]

    def _context_line(self, record: ArchiveRecord) -> str:
        message = record.message
        assert message is not None
        who = "you" if record.kind is RecordKind.SENT else message.from_aid
        text = " ".join((message.text or f"<{message.payload.type}>").split())
        if len(text) > MAX_CONTEXT_CHARS:
            text = text[: MAX_CONTEXT_CHARS - 1] + "…"
        unaddressed = " (not addressed to you)" if record.kind is RecordKind.FILTERED else ""
        return f"[{who}]{unaddressed} {text}"

    async def _ask_model(self, messages: list[LLMMessage]) -> ObserverOutput:
        self.model_calls += 1
        self.last_request = messages
        if not self.stream:
            return parse_observer_output(result_text(await self.model.create(messages)))
        parser = ObserverStreamParser()
        stream = self.model.create_stream(messages)
        try:
            async for item in stream:
                if isinstance(item, CreateResult):
                    if not parser.shown and isinstance(item.content, str) and parser.decision is None:
                        parser.feed(item.content)  # a client that streams no chunks, only the result
                    break
                parser.feed(item)
                if parser.decision is ObserverDecision.SILENT:
                    break  # decided: the rest would be spent on text nobody sees
        finally:
            await stream.aclose()
        return parser.finish()


def _is(record: ArchiveRecord, message: AUNMessage) -> bool:
    other = record.message
    return other is not None and other.message_id == message.message_id and other.from_aid == message.from_aid
