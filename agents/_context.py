"""An agent's memory, read back from the archive as model context, within a token budget.

The archive already holds everything an agent lived through: what it received, what its channel
kept from it (`filtered`), what it sent and what it thought. Reading the context from there, instead
of keeping it in the instance, is what lets an agent be evicted when idle, or its process restarted
on the same archive file, and go on with the same conversation.

Each record becomes one line, oldest first; the newest lines are kept until the token budget is
spent (tokens are estimated at four characters each, so no tokenizer has to be downloaded).
Timestamps are left out on purpose: the same history makes the same request, which is what keeps
content-keyed cassettes replaying.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from aun_runtime import ArchiveRecord, AUNMessage, RecordKind
from protocols.aun import AIDMention, JsonPayload, ScopeMention, ToolCallPayload, ToolResultPayload

__all__ = ["CHARS_PER_TOKEN", "CONTEXT_KINDS", "MAX_LINE_CHARS", "addressing", "context_lines", "describe"]

#: What an agent remembers: messages shown to it, kept from it, sent by it, and its own thoughts.
CONTEXT_KINDS = (RecordKind.RECEIVED, RecordKind.FILTERED, RecordKind.SENT, RecordKind.THOUGHT)
#: One line is cut to this many characters, so one long paste cannot crowd out the rest.
MAX_LINE_CHARS = 1_000
#: The estimate used for the token budget.
CHARS_PER_TOKEN = 4


def where(message: AUNMessage, me: str) -> str:
    """`#group`, or the other side of a direct conversation."""
    if message.group_id is not None:
        return f"#{message.group_id}"
    other = message.to if message.from_aid == me else message.from_aid
    return f"direct with {other}"


def addressing(message: AUNMessage, me: str) -> str:
    """Whom `message` is addressed to, from `me`'s point of view."""
    if message.group_id is None:
        return "to you" if message.to == me else f"to {message.to}"
    named = [m.aid for m in message.mentions if isinstance(m, AIDMention)]
    if me in named:
        return "to you"
    if any(isinstance(m, ScopeMention) for m in message.mentions):
        return "to everyone"
    if named:
        return "to " + ", ".join(named)
    return "to no one in particular"


def describe(message: AUNMessage) -> str:
    """A message's content as one line of text, whatever its payload."""
    payload = message.payload
    if message.text is not None:
        text = message.text
    elif isinstance(payload, ToolCallPayload):
        text = f"uses its tool {payload.name}({json.dumps(payload.arguments, sort_keys=True, default=str)})"
    elif isinstance(payload, ToolResultPayload):
        outcome = payload.result if payload.ok else f"error: {payload.error}"
        text = f"tool result: {json.dumps(outcome, sort_keys=True, default=str)}"
    elif isinstance(payload, JsonPayload):
        text = (
            payload.fallback_text
            or f"{payload.kind}: {json.dumps(payload.data, sort_keys=True, default=str)}"
        )
    else:
        text = f"<{payload.type}>"
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_LINE_CHARS else flat[: MAX_LINE_CHARS - 1] + "…"


def _line(record: ArchiveRecord, me: str) -> str | None:
    if record.kind is RecordKind.THOUGHT:
        text = " ".join((record.text or "").split())[:MAX_LINE_CHARS]
        return f"(your private thought) {text}"
    message = record.message
    if message is None:
        return None
    if record.kind is RecordKind.SENT:
        return f"[you, {where(message, me)}, {addressing(message, me).replace('to you', 'to yourself')}] {describe(message)}"
    kept = ", not shown to you then" if record.kind is RecordKind.FILTERED else ""
    return f"[{message.from_aid}, {where(message, me)}, {addressing(message, me)}{kept}] {describe(message)}"


def context_lines(
    records: Sequence[ArchiveRecord], me: str, *, token_budget: int, leave_out: AUNMessage | None
) -> list[str]:
    """The newest lines of `records` (oldest first) that fit in `token_budget` tokens.

    Args:
        records: the agent's archive records, oldest first.
        me: the agent's AID.
        token_budget: how many (estimated) tokens the lines may take together.
        leave_out: the message being handled, which is shown on its own.
    """
    budget = token_budget * CHARS_PER_TOKEN
    kept: list[str] = []
    for record in reversed(records):
        message = record.message
        if (
            leave_out is not None
            and message is not None
            and message.message_id == leave_out.message_id
            and message.from_aid == leave_out.from_aid
        ):
            continue
        line = _line(record, me)
        if line is None:
            continue
        budget -= len(line) + 1
        if budget < 0:
            break
        kept.append(line)
    kept.reverse()
    return kept
