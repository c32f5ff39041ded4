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


def stalling_model() -> ScriptedChatCompletionClient:
    """Round one: call ``stall`` for an hour. Round two: reply with what the agent handed back, and
    look a city up, to show the workbench still works. Round three: reply with that."""

    def respond(request: ModelRequest) -> CreateResult:
        [*_, last] = request.messages
        if isinstance(last, FunctionExecutionResultMessage):
            results = {r.name: r.content for r in last.content}
            if "stall" in results:
                calls = [
                    FunctionCall(id="r0", name="reply", arguments=json.dumps({"text": f"the tool said: {results['stall']}"})),
                    FunctionCall(id="c1", name="lookup", arguments=json.dumps({"city": "Lagos"})),
                ]
            else:
                calls = [FunctionCall(id="r1", name="reply", arguments=json.dumps({"text": results["lookup"]}))]
        else:
            calls = [FunctionCall(id="c0", name="stall", arguments=json.dumps({"seconds": 3600}))]
        return CreateResult(
            finish_reason="function_calls", content=calls, usage=RequestUsage(prompt_tokens=5, completion_tokens=5), cached=False
        )

    return ScriptedChatCompletionClient(respond)


async def test_an_mcp_tool_that_hangs_is_cut_off_and_the_model_is_told() -> None:
    model = stalling_model()
    params = StdioServerParams(command=sys.executable, args=[str(SERVER)], read_timeout_seconds=60)
    async with McpWorkbench(params) as workbench, AUNRuntime() as runtime:
        await runtime.register_agent(
            "scout.local", lambda: AutonomousAgent(model, tools=workbench, tool_timeout=0.5)
        )
        human = await runtime.open_inbox("alice.local")
        await human.send("scout.local", "Wait an hour for me, then look up Lagos.")
        await runtime.settle()

        timed_out = "TimeoutError: the tool stall timed out after 0.5 s (tool_timeout)"
        [*_, handed_back] = model.requests[1].messages
        assert isinstance(handed_back, FunctionExecutionResultMessage)
        assert [(r.name, r.content, r.is_error) for r in handed_back.content] == [("stall", timed_out, True)]
        # The conversation was shown that it timed out...
        results = [
            m.payload
            for m in (r.message for r in runtime.archive.records(kinds=[RecordKind.SENT]))
            if m is not None and isinstance(m.payload, ToolResultPayload)
        ]
        assert [(p.call_id, p.ok, p.error) for p in results[:1]] == [("c0", False, timed_out)]
        # ...and the workbench went on working: the next call in the same turn reached the server.
        texts = [m.payload.text for m in human.received if isinstance(m.payload, TextPayload)]
        assert texts == [f"the tool said: {timed_out}", "Lagos: Nigeria, 15.4 million people, on the Gulf of Guinea."]
        assert runtime.stats.dead_letters == 0


async def test_a_turn_cut_off_while_its_mcp_server_starts_leaves_the_workbench_working() -> None:
    """The handler timeout cuts a turn still waiting for its MCP server (it takes two seconds to
    start); the workbench, shared by whoever made it, still works once the server is up: the cut
    request was let go, not cancelled under the workbench's session actor (which that would crash)."""
    model = stalling_model()
    params = StdioServerParams(command=sys.executable, args=[str(SERVER), "--slow-start=2"], read_timeout_seconds=60)
    async with McpWorkbench(params) as workbench, AUNRuntime(handler_timeout=0.5) as runtime:
        await runtime.register_agent("scout.local", lambda: AutonomousAgent(model, tools=workbench, tool_timeout=None))
        human = await runtime.open_inbox("alice.local")
        await human.send("scout.local", "Wait an hour for me.")
        await runtime.settle()
        [dead] = runtime.archive.dead_letters()
        assert (dead.reason or "").startswith("HandlerTimeoutError: the handler of scout.local ran 0.")
        assert model.requests == []  # cut off before the tools were listed, so before any model call

        result = await workbench.call_tool("lookup", {"city": "Osaka"})
        assert not result.is_error and result.to_text() == "Osaka: Japan, 2.7 million people, on Osaka Bay."
