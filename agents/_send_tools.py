"""The send tools a model agent speaks with: their schemas, what each one does, and the same tools
as autogen-core `Tool` objects for a tool loop of someone else's (an agentchat `AssistantAgent`'s).

A model-backed AUN agent's text output is its thinking; the only way it speaks is by calling one of
these tools, zero, one or several times in a turn. Each is a plain function tool to the model. The
agent runs them itself, in the turn's context, so that a reply carries the thread of the message
being handled and is counted in its budgets like any other send. Whoever runs them, they go through
the agent's own `send` / `group_send` / `reply`: the hop guard, the budgets and the archive hold for
every message they send.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final, NamedTuple

from autogen_core import CancellationToken
from autogen_core.tools import BaseTool, ToolSchema
from pydantic import BaseModel, ConfigDict

from aun_runtime import AUNAgent, AUNMessage, BudgetExceeded, HopLimitExceeded
from protocols.aun import ToolCallPayload, ToolResultPayload
from protocols.errors import AUNError

__all__ = [
    "FOLLOW_UP",
    "POST_TO_GROUP",
    "REPLY",
    "SEND_MESSAGE",
    "SEND_TOOL_NAMES",
    "SendOutcome",
    "SendTool",
    "SendToolOutsideATurnError",
    "ToolArgumentError",
    "send_tool_schemas",
    "show_tool_use",
    "speak",
    "speaking_as",
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


class SendOutcome(NamedTuple):
    """What running one send tool came to."""

    #: What the model is told.
    text: str
    #: Nothing was sent.
    failed: bool
    #: The model could do better if asked again (a wrong AID could be corrected; a budget stop could not).
    correctable: bool


async def speak(agent: AUNAgent, name: str, arguments: Mapping[str, Any]) -> SendOutcome:
    """Run the send tool `name` (`reply`, `send_message` or `post_to_group`) as `agent`, in its
    current turn.

    A direct message or a group post made while handling a message answers that message
    (`in_reply_to`), so a transcript shows it under its cause, as it shows a reply, and it is one
    hop further in the same thread, counted in that thread's budgets.
    """
    try:
        if name == REPLY:
            # In a mention group reply() names the sender of the message answered.
            sent = await agent.reply(string_argument(arguments, "text"))
        elif name == SEND_MESSAGE:
            sent = await agent.send(
                string_argument(arguments, "to"), string_argument(arguments, "text"), in_reply_to=agent.inbound
            )
        elif name == POST_TO_GROUP:
            mentions = arguments.get("mentions") or []
            if not isinstance(mentions, list) or not all(isinstance(m, str) for m in mentions):
                raise ToolArgumentError("'mentions' must be a list of AIDs (or 'all')")
            sent = await agent.group_send(
                string_argument(arguments, "group_id"),
                string_argument(arguments, "text"),
                mentions=mentions,
                in_reply_to=agent.inbound,
            )
        else:
            raise ValueError(f"{name!r} is not a send tool that speaks")
    except (BudgetExceeded, HopLimitExceeded) as exc:
        return SendOutcome(f"not sent: {exc}", True, False)  # recorded as a stop already
    except (AUNError, ToolArgumentError) as exc:
        # An unknown AID, a group it is not in, bad arguments: the model is told, and may correct it.
        return SendOutcome(f"not sent: {exc}", True, True)
    return SendOutcome(f"sent (message {sent.message_id})", False, False)


async def show_tool_use(agent: AUNAgent, about: AUNMessage, payload: ToolCallPayload | ToolResultPayload) -> None:
    """Show the conversation of `about` (its group, or its sender) one use of `agent`'s own tool."""
    try:
        if about.group_id is not None:
            await agent.group_send(about.group_id, payload, in_reply_to=about)
        else:
            await agent.send(about.from_aid, payload, in_reply_to=about)
    except AUNError as exc:  # an annotation that cannot go out changes nothing about the tool use
        agent.think(f"could not show the use of {getattr(payload, 'name', 'a tool')}: {exc}")


# -- the send tools as autogen-core tools ----------------------------------------------------------

#: The AUN agent a `SendTool` speaks as: set for the length of a turn by `speaking_as`. A context
#: variable rather than an argument because the tool is made before that agent exists (it is given
#: to a chat agent built in a factory), and it reaches every task the turn starts (a tool loop runs
#: each call in a task of its own).
_SPEAKER: ContextVar[AUNAgent | None] = ContextVar("aun_send_tool_speaker", default=None)


@contextmanager
def speaking_as(agent: AUNAgent) -> Iterator[None]:
    """Inside the block, every `SendTool` run (in this task or one it starts) speaks as `agent`."""
    token = _SPEAKER.set(agent)
    try:
        yield
    finally:
        _SPEAKER.reset(token)


class SendToolOutsideATurnError(AUNError, RuntimeError):
    """A send tool ran where no AUN agent is handling a message: there is nobody to speak as."""


class _Arguments(BaseModel):
    # The schema the model sees is the send tool's own; its arguments are checked by speak(), which
    # tells the model what is wrong in the same words whoever runs the tool.
    model_config = ConfigDict(extra="allow")


class _NotSent(Exception):
    """Raised out of a send tool that sent nothing, so that the tool loop reports an error result."""


class SendTool(BaseTool[_Arguments, Any]):
    """A send tool (`send_message`, `post_to_group`) as an autogen-core tool, for a tool loop that
    runs inside an AUN agent's turn (see `speaking_as`). The model sees the same schema and
    description as an autonomous agent's model does; a send that fails raises, so the tool loop
    reports an error result that says why."""

    def __init__(self, schema: ToolSchema) -> None:
        super().__init__(_Arguments, str, schema["name"], schema.get("description", ""))
        self._schema = schema

    @property
    def schema(self) -> ToolSchema:
        return self._schema

    async def run(self, args: _Arguments, cancellation_token: CancellationToken) -> str:
        agent = _SPEAKER.get()
        if agent is None:
            raise SendToolOutsideATurnError(
                f"{self.name} speaks for an AUN agent and runs only while one handles a message "
                "(a chat agent run by agents.agentchat.from_agentchat)"
            )
        outcome = await speak(agent, self.name, args.model_dump())
        if outcome.failed:
            raise _NotSent(outcome.text)
        return outcome.text
