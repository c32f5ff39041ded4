"""`ModelRequest`: one chat-completion request, normalised, with a key derived from its content.

The key is what makes offline answers independent of call order: two agents that ask the model at
the same time get the answers recorded for *what they asked*, not for *when they asked*. It is the
SHA-256 of the request's canonical JSON (sorted keys, no whitespace): the messages, the tool schemas,
the tool choice, the JSON-output setting and any extra create arguments. The model's name is left
out on purpose, so that a cassette recorded against one server replays for any configuration.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from autogen_core.models import LLMMessage, SystemMessage
from autogen_core.tools import Tool, ToolSchema
from pydantic import BaseModel

__all__ = ["ModelRequest", "canonical_json"]

ToolChoice = Tool | Literal["auto", "required", "none"]
JsonOutput = bool | type[BaseModel] | None


def canonical_json(data: Any) -> str:
    """JSON with sorted keys and no insignificant whitespace: equal data, equal text."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _tool_schema(tool: Tool | ToolSchema) -> dict[str, Any]:
    return dict(tool.schema if isinstance(tool, Tool) else tool)


@dataclass(frozen=True)
class ModelRequest:
    """A request as the model sees it, and its content key.

    Attributes:
        messages: the chat messages, in order.
        data: the canonical, JSON-ready form the key is computed from (what a cassette stores).
    """

    messages: tuple[LLMMessage, ...]
    data: dict[str, Any] = field(repr=False)
    #: The ``create`` keyword arguments as given (a live client is called with them when recording).
    create_args: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(
        cls,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = (),
        tool_choice: ToolChoice = "auto",
        json_output: JsonOutput = None,
        extra_create_args: Mapping[str, Any] | None = None,
    ) -> ModelRequest:
        """Normalise the arguments of `ChatCompletionClient.create`."""
        output: Any = json_output
        if isinstance(json_output, type):
            output = {"structured": json_output.__name__, "schema": json_output.model_json_schema()}
        data: dict[str, Any] = {"messages": [m.model_dump(mode="json") for m in messages]}
        # Defaults are left out, so that the common request stays small and readable in a cassette.
        if tools:
            data["tools"] = [_tool_schema(tool) for tool in tools]
            data["tool_choice"] = tool_choice.name if isinstance(tool_choice, Tool) else tool_choice
        if output is not None:
            data["json_output"] = output
        if extra_create_args:
            data["extra_create_args"] = dict(extra_create_args)
        create_args: dict[str, Any] = {
            "tools": list(tools),
            "tool_choice": tool_choice,
            "json_output": json_output,
            "extra_create_args": dict(extra_create_args or {}),
        }
        return cls(tuple(messages), data, create_args)

    @cached_property
    def key(self) -> str:
        """SHA-256 (hex) of the canonical JSON of `data`."""
        return request_key(self.data)

    @property
    def system(self) -> str:
        """The system messages' text, joined (empty if there is none)."""
        return "\n".join(m.content for m in self.messages if isinstance(m, SystemMessage))

    @property
    def last_text(self) -> str:
        """The last message's content as text (what is being asked now)."""
        if not self.messages:
            return ""
        return _as_text(self.messages[-1])

    def describe(self) -> str:
        """A one-line summary for error messages: key, size, who asks and what."""
        first_system = self.system.strip().splitlines()[0] if self.system.strip() else "no system prompt"
        return (
            f"request {self.key[:16]}… ({len(self.messages)} messages; system: {_snip(first_system, 60)!r}; "
            f"last: {_snip(self.last_text, 100)!r})"
        )


def request_key(data: Mapping[str, Any]) -> str:
    """The content key of a request's canonical data."""
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()


def _as_text(message: LLMMessage) -> str:
    content: Any = message.content
    if isinstance(content, str):
        return content
    return canonical_json([_part(part) for part in content])


def _part(part: Any) -> Any:
    if isinstance(part, BaseModel):
        return part.model_dump(mode="json")
    if dataclasses.is_dataclass(part) and not isinstance(part, type):
        return dataclasses.asdict(part)
    return str(part)


def _snip(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
