"""The send tools an autonomous agent's model speaks with: their schemas, and what each one does.

A model-backed AUN agent's text output is its thinking; the only way it speaks is by calling one of
these tools, zero, one or several times in a turn. Each is a plain function tool to the model. The
agent runs them itself, in the turn's context, so that a reply carries the thread of the message
being handled and is counted in its budgets like any other send.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from autogen_core.tools import ToolSchema

__all__ = [
    "FOLLOW_UP",
    "POST_TO_GROUP",
    "REPLY",
    "SEND_MESSAGE",
    "SEND_TOOL_NAMES",
    "ToolArgumentError",
    "send_tool_schemas",
    "string_argument",
]

REPLY: Final = "reply"
SEND_MESSAGE: Final = "send_message"
POST_TO_GROUP: Final = "post_to_group"
FOLLOW_UP: Final = "follow_up"
SEND_TOOL_NAMES: Final = frozenset({REPLY, SEND_MESSAGE, POST_TO_GROUP, FOLLOW_UP})


class ToolArgumentError(ValueError):
    """A tool was called with arguments it cannot use; the message goes back to the model."""


def _schema(name: str, description: str, properties: dict[str, Any], required: list[str]) -> ToolSchema:
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
    }


_TEXT = {"type": "string", "description": "what to say"}


def send_tool_schemas(*, follow_ups: bool) -> list[ToolSchema]:
    """The send tools offered to the model (`follow_up` only if the agent may schedule one)."""
    tools = [
        _schema(
            REPLY,
            "Answer the message you are handling: in its group if it came through one, else to its sender. "
            "Call it zero times to stay silent, or several times to say several things.",
            {"text": _TEXT},
            ["text"],
        ),
        _schema(
            SEND_MESSAGE,
            "Send a direct message to any agent by its AID (for example 'db.local'), to start or continue "
            "a conversation of your own.",
            {"to": {"type": "string", "description": "the recipient's AID"}, "text": _TEXT},
            ["to", "text"],
        ),
        _schema(
            POST_TO_GROUP,
            "Post a message to a group you belong to. In a group in mention mode only the agents you "
            "mention see it; mention 'all' to address everyone.",
            {
                "group_id": {"type": "string", "description": "the group"},
                "text": _TEXT,
                "mentions": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "AIDs to address, or 'all'",
                },
            },
            ["group_id", "text"],
        ),
    ]
    if follow_ups:
        tools.append(
            _schema(
                FOLLOW_UP,
                "Wake yourself up later, with no new message, to continue the conversation you are in "
                "(check on something, keep a promise). Nothing is sent now.",
                {
                    "after_seconds": {"type": "number", "description": "how long to wait"},
                    "note": {"type": "string", "description": "what to do then, for your future self"},
                },
                ["after_seconds", "note"],
            )
        )
    return tools


def string_argument(arguments: Mapping[str, Any], name: str, *, required: bool = True) -> str:
    """A string argument of a tool call, or a `ToolArgumentError` that says what is wrong."""
    value = arguments.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise ToolArgumentError(f"'{name}' must be a non-empty string")
    return value
