"""Stand-in model for the MCP example's scout: it looks things up with its tools, and says what they
returned.

A new message that asks about cities (`about Osaka and Lagos`) gets one `lookup` call per city;
once the results are back, one `reply` with them, word for word. The model computes nothing: what
the scout says is what the MCP server answered. A message that names no city gets a reply saying so.
"""

from __future__ import annotations

import json
import re

from autogen_core import FunctionCall
from autogen_core.models import CreateResult, FunctionExecutionResultMessage, RequestUsage

from aun_runtime.models import ModelRequest, ScriptedChatCompletionClient

__all__ = ["gazetteer_scout"]

_CITIES = re.compile(r"\b([A-Z][a-z]+)\b")


def _calls(*calls: tuple[str, dict[str, str]], prefix: str) -> CreateResult:
    content = [
        FunctionCall(id=f"{prefix}-{n}", name=name, arguments=json.dumps(arguments))
        for n, (name, arguments) in enumerate(calls, start=1)
    ]
    return CreateResult(finish_reason="function_calls", content=content, usage=RequestUsage(30, 10), cached=False)


def _answer(request: ModelRequest) -> CreateResult:
    last = request.messages[-1]
    if isinstance(last, FunctionExecutionResultMessage):
        looked_up = " ".join(result.content for result in last.content if result.name == "lookup")
        return _calls(("reply", {"text": looked_up}), prefix="answer")
    question = request.last_text.split("):\n", 1)[-1]
    asked = question.split(" about ", 1)[1] if " about " in question else ""
    cities = _CITIES.findall(asked)
    if not cities:
        return _calls(("reply", {"text": "Ask me about a city, and I will look it up."}), prefix="none")
    return _calls(*(("lookup", {"city": city}) for city in cities), prefix="lookup")


def gazetteer_scout() -> ScriptedChatCompletionClient:
    """The scout of docs/mcp.md: looks cities up with the gazetteer's `lookup` tool, then replies."""
    return ScriptedChatCompletionClient(_answer)
