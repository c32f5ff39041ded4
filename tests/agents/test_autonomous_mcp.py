"""MCP tools through autogen-ext's ``McpWorkbench``: an autonomous agent whose local tools are a real
MCP server (tests/agents/mcp_server.py, run as a subprocess over stdio).

Only the model is scripted, and it computes nothing: what it says on its second round it reads from
the tool results the agent handed back, so the reply carries what the MCP server really computed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import psutil
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, FunctionExecutionResultMessage, RequestUsage
from autogen_ext.tools.mcp import McpWorkbench, StdioServerParams

from agents.autonomous import AutonomousAgent
from aun_runtime import AUNRuntime, RecordKind, TextPayload, ToolCallPayload, ToolResultPayload
from aun_runtime.models import ModelRequest, ScriptedChatCompletionClient

SERVER = Path(__file__).with_name("mcp_server.py")
SENTENCE = "the quick brown fox jumps over the lazy dog"


def server_processes() -> list[psutil.Process]:
    """This process's children that run the MCP server script."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if str(SERVER) in child.cmdline():
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def calling_model() -> ScriptedChatCompletionClient:
    """Round one: call both MCP tools. Round two: reply with what they returned."""

    def respond(request: ModelRequest) -> str | CreateResult:
        [*_, last] = request.messages
        if isinstance(last, FunctionExecutionResultMessage):
            results = {r.name: r.content for r in last.content}
            text = f"{results['lookup']} Your sentence has {results['word_count']} words."
            calls = [FunctionCall(id="r0", name="reply", arguments=json.dumps({"text": text}))]
        else:
            calls = [
                FunctionCall(id="c0", name="lookup", arguments=json.dumps({"city": "Osaka"})),
                FunctionCall(id="c1", name="word_count", arguments=json.dumps({"text": SENTENCE})),
            ]
        return CreateResult(
            finish_reason="function_calls",
            content=calls,
            usage=RequestUsage(prompt_tokens=5, completion_tokens=5),
            cached=False,
        )

    return ScriptedChatCompletionClient(respond)


async def test_mcp_tools_run_in_a_real_server_and_are_shown_as_annotations() -> None:
    model = calling_model()
    params = StdioServerParams(command=sys.executable, args=[str(SERVER)], read_timeout_seconds=10)
    # The workbench belongs to whoever made it: the agent uses it (and McpWorkbench starts itself on
    # first use), but never stops it. ``async with`` starts the server and stops it on the way out.
    async with McpWorkbench(params) as workbench:
        async with AUNRuntime() as runtime:
            await runtime.register_agent("scout.local", lambda: AutonomousAgent(model, tools=workbench))
            human = await runtime.open_inbox("alice.local")
            question = await human.send("scout.local", "Tell me about Osaka, and count my words.")
            await runtime.settle()

            # The reply carries what the server computed (the model only copied it).
            texts = [m.payload.text for m in human.received if isinstance(m.payload, TextPayload)]
            assert texts == ["Osaka: Japan, 2.7 million people, on Osaka Bay. Your sentence has 9 words."]
            assert len(model.requests) == 2

            # The model was offered the MCP tools, with the parameters the server declared.
            offered = {tool["name"]: tool for tool in model.requests[0].data["tools"]}
            assert {"reply", "lookup", "word_count"} <= offered.keys()
            assert offered["lookup"]["parameters"]["properties"]["city"]["type"] == "string"
            assert offered["lookup"]["parameters"]["required"] == ["city"]
            assert offered["word_count"]["parameters"]["properties"]["text"]["type"] == "string"
            assert offered["word_count"]["parameters"]["required"] == ["text"]
            assert "gazetteer" in offered["lookup"]["description"]

            # What the model saw on its second round: the server's results, under the model's call ids.
            [*_, handed_back] = model.requests[1].messages
            assert isinstance(handed_back, FunctionExecutionResultMessage)
            assert [(r.call_id, r.name, r.content, r.is_error) for r in handed_back.content] == [
                ("c0", "lookup", "Osaka: Japan, 2.7 million people, on Osaka Bay.", False),
                ("c1", "word_count", "9", False),
            ]

            # Each use went to the conversation as the agent's own annotations: a call, then its result.
            annotations = [
                m
                for m in (r.message for r in runtime.archive.records(kinds=[RecordKind.SENT]))
                if m is not None
                and m.from_aid == "scout.local"
                and isinstance(m.payload, ToolCallPayload | ToolResultPayload)
            ]
            assert all(m.to == "alice.local" and m.in_reply_to == question.message_id for m in annotations)
            payloads: list[Any] = [m.payload for m in annotations]
            assert [type(p) for p in payloads] == [ToolCallPayload, ToolResultPayload] * 2
            lookup_call, lookup_result, count_call, count_result = payloads
            assert (lookup_call.call_id, lookup_call.name, lookup_call.arguments) == (
                "c0",
                "lookup",
                {"city": "Osaka"},
            )
            assert (lookup_result.call_id, lookup_result.ok) == ("c0", True)
            assert lookup_result.result == "Osaka: Japan, 2.7 million people, on Osaka Bay."
            assert (count_call.call_id, count_call.name, count_call.arguments) == (
                "c1",
                "word_count",
                {"text": SENTENCE},
            )
            assert (count_result.call_id, count_result.ok, count_result.result) == ("c1", True, "9")

            # One server process did the work, and it outlives the runtime: the agent does not own it.
            [process] = server_processes()
        assert process.is_running()
    # Stopping the workbench ended the server process.
    process.wait(timeout=5)
    assert server_processes() == []
