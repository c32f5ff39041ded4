"""Models of the shapes a real model takes, for the loopback stand-in server (answers of ``body``).

Each is a function of the request body the real OpenAI client sent. Where the shape needs a tool
the request does not offer (an observer offers none), it answers with plain text instead, as a real
model would.
"""

from __future__ import annotations

from typing import Any

from .openai_stand_in import ToolCalls

#: What the always-answering model says, whatever it is asked.
ALWAYS = "I think we should look into this together."


def offered(body: dict[str, Any]) -> set[str]:
    """The names of the tools the request offers."""
    return {tool["function"]["name"] for tool in body.get("tools", [])}


def always_answers(body: dict[str, Any]) -> str:
    """A model that always has something to say, in plain text."""
    return ALWAYS


def replies_twice(body: dict[str, Any]) -> str | ToolCalls:
    """A model that always calls the reply tool twice (an observer, offering none, gets text)."""
    if "reply" not in offered(body):
        return "__REPLY__ " + ALWAYS
    return ToolCalls([("reply", {"text": "First thought."}), ("reply", {"text": "And another."})])


def uses_tool_forever(tool: str) -> Any:
    """A model that calls the local tool ``tool`` every time it may."""

    def answer(body: dict[str, Any]) -> str | ToolCalls:
        if tool not in offered(body):
            return ALWAYS
        return ToolCalls([(tool, {"query": "more"})])

    return answer


def silent(body: dict[str, Any]) -> str:
    """A model that always answers the observer protocol's silence marker."""
    return "__SILENT__"


def asker(body: dict[str, Any]) -> str:
    """Who made the request: the AID an agent's system prompt names (``You are <aid>,``)."""
    system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
    return system.removeprefix("You are ").split(",", 1)[0].split(" ", 1)[0]
