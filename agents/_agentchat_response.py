"""Reading what an agentchat chat agent produced in a turn: its answer, its tool use, its cost.

The companion of `agents.agentchat`, and with it the only module that imports agentchat.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from autogen_agentchat.base import Response
from autogen_agentchat.messages import (
    BaseAgentEvent,
    BaseChatMessage,
    ToolCallExecutionEvent,
    ToolCallRequestEvent,
    ToolCallSummaryMessage,
)

from protocols.aun import ToolCallPayload, ToolResultPayload

from ._send_tools import SEND_TOOL_NAMES

__all__ = ["MAX_THOUGHT_CHARS", "answer_text", "one_line", "sent_only", "tokens", "tool_use"]

#: A thought about one inner message is cut to this many characters (a tool result may be long).
MAX_THOUGHT_CHARS = 500


def sent_only(message: BaseChatMessage) -> list[str]:
    """The send tools a response's answer summarises, if it is agentchat's summary of tool results
    (`reflect_on_tool_use=False`) and they are all it summarises; else nothing."""
    if not isinstance(message, ToolCallSummaryMessage) or not message.tool_calls:
        return []
    names = sorted({call.name for call in message.tool_calls})
    return names if SEND_TOOL_NAMES.issuperset(names) else []


def answer_text(message: BaseChatMessage) -> str:
    """The text a response answers with. In agentchat's summary of tool results what the send tools
    returned is left out: what they sent has been said already."""
    if not isinstance(message, ToolCallSummaryMessage):
        return message.to_text()
    said = {result.content for result in message.results if result.name in SEND_TOOL_NAMES}
    return "\n".join(line for line in message.content.split("\n") if line not in said)


def tool_use(event: BaseAgentEvent | BaseChatMessage) -> list[ToolCallPayload | ToolResultPayload]:
    """The annotations that show the conversation the tool use `event` reports (none for the send
    tools: what they send is in the conversation already)."""
    if isinstance(event, ToolCallRequestEvent):
        return [
            ToolCallPayload(call_id=call.id or call.name, name=call.name, arguments=_arguments(call.arguments))
            for call in event.content
            if call.name not in SEND_TOOL_NAMES
        ]
    if isinstance(event, ToolCallExecutionEvent):
        return [
            ToolResultPayload(call_id=result.call_id or result.name, ok=False, error=result.content)
            if result.is_error
            else ToolResultPayload(call_id=result.call_id or result.name, ok=True, result=result.content)
            for result in event.content
            if result.name not in SEND_TOOL_NAMES
        ]
    return []


def tokens(response: Response) -> int:
    """Model tokens (prompt + completion) the response reports, its inner messages' included."""
    messages: Sequence[BaseAgentEvent | BaseChatMessage] = [
        *(response.inner_messages or ()),
        response.chat_message,
    ]
    return sum(
        m.models_usage.prompt_tokens + m.models_usage.completion_tokens
        for m in messages
        if m.models_usage is not None
    )


def one_line(message: BaseAgentEvent | BaseChatMessage) -> str:
    """An inner message as one thought: who, what kind, and its text cut to `MAX_THOUGHT_CHARS`."""
    text = " ".join(message.to_text().split())
    if len(text) > MAX_THOUGHT_CHARS:
        text = text[: MAX_THOUGHT_CHARS - 1] + "…"
    return f"{message.source} {type(message).__name__}: {text}"


def _arguments(raw: str) -> dict[str, Any]:
    try:
        arguments = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"raw": raw}  # shown as the model wrote it
    return arguments if isinstance(arguments, dict) else {"value": arguments}
