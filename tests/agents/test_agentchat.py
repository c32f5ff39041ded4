"""The agentchat adapter: a real AssistantAgent, with the real OpenAI client, as an AUN agent.

The model is the only stand-in: a loopback OpenAI-compatible server (tests/models/openai_stand_in.py)
answers over real HTTP and keeps every request, so each test can check what the assistant showed it.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_core import FunctionCall
from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    FunctionExecutionResultMessage,
    RequestUsage,
)
from autogen_core.tools import FunctionTool

from agents.agentchat import AgentChatAgent, from_agentchat
from aun_runtime import (
    DEFAULT_BUDGETS,
    AUNActorRuntime,
    AUNMessage,
    AUNRuntime,
    Budgets,
    RecordKind,
    SQLiteStateStore,
    TextPayload,
    ToolCallPayload,
    ToolResultPayload,
)
from aun_runtime._core import group_topic
from aun_runtime.models import ModelRequest, ScriptedChatCompletionClient, model_client_from_env
from tests.models.openai_stand_in import OpenAIStandIn, ToolCalls, openai_stand_in

AID = "assistant.local"
#: The stand-in reports 7 prompt and 3 completion tokens for every request it answers.
STAND_IN_TOKENS = 7 + 3


def user_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


@pytest.fixture
def server() -> Iterator[OpenAIStandIn]:
    """Answers with ``server.script[last user text]`` (default ``"noted"``)."""
    script: dict[str, str] = {}

    def answer(body: dict[str, Any]) -> str:
        return script.get(user_texts(body)[-1], "noted")

    with openai_stand_in(answer) as stand_in:
        stand_in.script = script  # type: ignore[attr-defined]
        yield stand_in


def openai_client(server: OpenAIStandIn) -> ChatCompletionClient:
    env = {"AUN_MODEL": "stand-in", "AUN_MODEL_BASE_URL": server.base_url, "AUN_MODEL_API_KEY": "sk-local"}
    return model_client_from_env(environ=env)


def assistant(client: ChatCompletionClient, **options: Any) -> Callable[[], AgentChatAgent]:
    return from_agentchat(lambda: AssistantAgent("assistant", model_client=client), **options)


def sent_by(runtime: AUNRuntime, aid: str) -> list[str]:
    return [r.text or "" for r in runtime.archive.history(aid, kinds=[RecordKind.SENT])]


def thoughts(runtime: AUNRuntime, aid: str) -> list[str]:
    return [r.text or "" for r in runtime.archive.history(aid, kinds=[RecordKind.THOUGHT])]


async def test_the_assistant_answers_with_what_its_model_said(server: OpenAIStandIn) -> None:
    server.script["What is the capital of France?"] = "Paris."  # type: ignore[attr-defined]
    client = openai_client(server)
    async with AUNRuntime() as runtime:
        await runtime.register_agent(AID, assistant(client))
        inbox = await runtime.open_inbox()
        question = await inbox.send(AID, "What is the capital of France?")
        answer = await inbox.next(timeout=10)
        assert answer is not None and answer.text == "Paris."
        assert answer.from_aid == AID and answer.in_reply_to == question.message_id
        [body] = server.requests
        [asked] = [m for m in body["messages"] if m["role"] == "user"]
        assert asked == {"role": "user", "name": "app_local", "content": "What is the capital of France?"}
        agent = await runtime.agent_instance(AID, AgentChatAgent)
        assert agent.model_turns == 1 and agent.tokens_used == STAND_IN_TOKENS
        assert agent.aun_metadata["mode"] == "autonomous"
    await client.close()


@pytest.mark.parametrize(
    ("output", "why"),
    [
        ("__SILENT__", "silent on app.local's message"),
        ("  __SILENT__ not a question for me", "silent on app.local's message: not a question for me"),
        ("", "silent on app.local's message: assistant gave an empty answer"),
        ("  \n ", "silent on app.local's message: assistant gave an empty answer"),
    ],
)
async def test_a_silent_or_empty_answer_sends_nothing_and_archives_why(
    server: OpenAIStandIn, output: str, why: str
) -> None:
    server.script["the build is green again"] = output  # type: ignore[attr-defined]
    client = openai_client(server)
    async with AUNRuntime() as runtime:
        await runtime.register_agent(AID, assistant(client))
        inbox = await runtime.open_inbox()
        await inbox.send(AID, "the build is green again")
        await runtime.settle()
        assert len(server.requests) == 1  # the model was asked...
        assert sent_by(runtime, AID) == [] and inbox.received == []  # ...and nothing was said
        assert thoughts(runtime, AID) == [why]
        assert runtime.stats.sent == 1  # only the inbox's message
    await client.close()


async def test_its_own_messages_and_tool_payloads_cost_no_model_call(server: OpenAIStandIn) -> None:
    client = openai_client(server)
    async with AUNRuntime() as runtime:
        await runtime.register_agent(AID, assistant(client))
        inbox = await runtime.open_inbox()
        await runtime.create_group("team", [AID, "app.local"])
        await inbox.send(AID, ToolCallPayload(call_id="c-1", name="search", arguments={"q": "x"}))
        await inbox.send(AID, ToolResultPayload(call_id="c-1", ok=True, result=[1, 2]))
        # What a gateway does when it echoes a member's own post back: the group topic, no sender.
        echo = AUNMessage(from_aid=AID, group_id="team", payload=TextPayload(text="my own words"))
        await runtime.core.publish_message(echo, group_topic("team"))
        await runtime.settle()
        assert server.requests == [] and sent_by(runtime, AID) == []
        assert thoughts(runtime, AID) == [
            "app.local's tool_call describes its own tool use: nothing to run",
            "app.local's tool_result describes its own tool use: nothing to run",
        ]
    await client.close()


async def _wait_for_eviction(core: AUNActorRuntime) -> None:
    for _ in range(500):  # the timer fires between 1.0 and 1.1 times the timeout
        if core.evicted:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the idle agent was never evicted")


async def test_its_memory_survives_idle_eviction(server: OpenAIStandIn) -> None:
    server.script["My name is Ada."] = "Nice to meet you, Ada."  # type: ignore[attr-defined]
    client = openai_client(server)
    core = AUNActorRuntime(idle_timeout=0.05)
    async with AUNRuntime(core=core) as runtime:
        await runtime.register_agent(AID, assistant(client))
        inbox = await runtime.open_inbox()
        await inbox.send(AID, "My name is Ada.")
        await runtime.settle()
        first = await runtime.agent_instance(AID, AgentChatAgent)
        await _wait_for_eviction(core)
        assert core.evicted == 1 and core.instances == 1  # only the inbox is left in memory

        await inbox.send(AID, "What is my name?")
        await runtime.settle()
        second = await runtime.agent_instance(AID, AgentChatAgent)
        assert second is not first and second.chat_agent is not first.chat_agent
        remembered = server.requests[1]["messages"]
        assert [(m["role"], m["content"]) for m in remembered[1:]] == [
            ("user", "My name is Ada."),
            ("assistant", "Nice to meet you, Ada."),
            ("user", "What is my name?"),
        ]
        assert sent_by(runtime, AID) == ["Nice to meet you, Ada.", "noted"]
    await client.close()


async def _session(tmp_path: Path, server: OpenAIStandIn, text: str) -> None:
    """One run of a runtime on the same files: tell the assistant ``text``, then close."""
    client = openai_client(server)
    core = AUNActorRuntime(state_store=SQLiteStateStore(tmp_path / "states.sqlite"))
    runtime = AUNRuntime(core=core, archive=tmp_path / "archive.sqlite")
    await runtime.register_agent(AID, assistant(client))
    inbox = await runtime.open_inbox()
    await runtime.start()
    await inbox.send(AID, text)
    await runtime.settle()
    await runtime.close()
    await client.close()


async def test_its_memory_survives_a_restart(tmp_path: Path, server: OpenAIStandIn) -> None:
    await _session(tmp_path, server, "The deploy window is Friday at 9.")
    with sqlite3.connect(tmp_path / "states.sqlite") as db:
        [(saved,)] = db.execute("SELECT state FROM agent_states WHERE agent_type = ?", (AID,))
    state = json.loads(saved)
    assert state["agentchat"]["type"] == "AssistantAgentState"
    assert "The deploy window is Friday at 9." in saved

    await _session(tmp_path, server, "When is the deploy window?")  # a new runtime, a new client
    assert user_texts(server.requests[1]) == [
        "The deploy window is Friday at 9.",
        "When is the deploy window?",
    ]


async def test_in_a_mention_group_the_reply_names_the_asker(server: OpenAIStandIn) -> None:
    server.script["assistant, what does the error mean?"] = "A timeout upstream."  # type: ignore[attr-defined]
    client = openai_client(server)
    async with AUNRuntime() as runtime:
        await runtime.register_agent(AID, assistant(client))
        alice = await runtime.open_inbox("alice.local")
        await runtime.open_inbox("bob.local")
        await runtime.create_group("team", [AID, "alice.local", "bob.local"], dispatch_mode="mention")
        await alice.group_send("team", "bob, lunch?", mentions=["bob.local"])
        await runtime.settle()
        assert server.requests == []  # not addressed to the assistant: its channel kept it back

        question = await alice.group_send("team", "assistant, what does the error mean?", mentions=[AID])
        await runtime.settle()
        [reply] = runtime.archive.history(AID, kinds=[RecordKind.SENT])
        assert reply.message is not None and reply.text == "A timeout upstream."
        assert reply.message.group_id == "team" and reply.message.in_reply_to == question.message_id
        assert reply.message.mentions_aid("alice.local")
        assert [m.text for m in alice.received] == ["A timeout upstream."]  # so the asker sees it
    await client.close()


def _weather_model() -> ScriptedChatCompletionClient:
    """Calls the ``weather`` tool first; once it sees the tool's result, answers in words."""

    def respond(request: ModelRequest) -> CreateResult:
        if any(isinstance(m, FunctionExecutionResultMessage) for m in request.messages):
            return CreateResult(
                finish_reason="stop",
                content="It is 21 degrees in Paris.",
                usage=RequestUsage(prompt_tokens=40, completion_tokens=8),
                cached=False,
            )
        call = FunctionCall(id="call-1", name="weather", arguments='{"city": "Paris"}')
        return CreateResult(
            finish_reason="function_calls",
            content=[call],
            usage=RequestUsage(prompt_tokens=30, completion_tokens=5),
            cached=False,
        )

    return ScriptedChatCompletionClient(respond)


async def test_tool_use_is_thought_not_said_and_every_call_is_counted() -> None:
    def weather(city: str) -> str:
        """Today's temperature in a city."""
        return f"21 degrees in {city}"

    model = _weather_model()
    tool = FunctionTool(weather, description="Today's temperature in a city.")
    make = from_agentchat(
        lambda: AssistantAgent("assistant", model_client=model, tools=[tool], reflect_on_tool_use=True)
    )
    async with AUNRuntime() as runtime:
        await runtime.register_agent(AID, make)
        inbox = await runtime.open_inbox()
        await inbox.send(AID, "How warm is it in Paris?")
        await runtime.settle()
        assert sent_by(runtime, AID) == ["It is 21 degrees in Paris."]  # the tool events never leave
        [request, execution] = thoughts(runtime, AID)
        assert request.startswith("assistant ToolCallRequestEvent: ") and '"city": "Paris"' in request
        assert (
            execution.startswith("assistant ToolCallExecutionEvent: ") and "21 degrees in Paris" in execution
        )
        agent = await runtime.agent_instance(AID, AgentChatAgent)
        assert agent.model_turns == 1 and agent.tokens_used == (30 + 5) + (40 + 8)


async def test_its_model_budget_stops_turns_before_they_reach_the_model(server: OpenAIStandIn) -> None:
    client = openai_client(server)
    async with AUNRuntime() as runtime:
        await runtime.register_agent(
            AID,
            from_agentchat(lambda: AssistantAgent("assistant", model_client=client)),
            budgets=Budgets(model_calls_per_window=1),
        )
        inbox = await runtime.open_inbox()
        await inbox.send(AID, "first")
        await inbox.send(AID, "second")
        await runtime.settle()
        assert len(server.requests) == 1 and sent_by(runtime, AID) == ["noted"]
        [stop] = runtime.archive.records(kinds=[RecordKind.BUDGET_STOP])
        assert stop.owner == AID and "model_calls_per_window=1" in (stop.reason or "")
        assert stop.message is not None and stop.message.text == "second"
        assert runtime.stats.budget_stops == 1 and runtime.stats.dead_letters == 0
        assert runtime.ledger.model_use(AID, stop.message.message_id) == (0, 0)
        first = next(r.message for r in runtime.archive.records(kinds=[RecordKind.SENT]) if r.message and r.message.text == "first")
        assert runtime.ledger.model_use(AID, first.message_id) == (1, STAND_IN_TOKENS)
    await client.close()


def test_a_factory_that_makes_no_chat_agent_is_refused() -> None:
    with pytest.raises(TypeError, match="not an agentchat ChatAgent"):
        AgentChatAgent(lambda: "assistant")  # type: ignore[arg-type, return-value]


async def test_every_model_call_of_a_tool_loop_is_metered() -> None:
    """An AssistantAgent allowed forty tool rounds, on a model that always calls its tool: each
    round is a model call of its own, so the thread's budget (8 calls) ends the turn, with a budget
    stop, instead of forty requests per question."""

    def lookup(query: str) -> str:
        """Look something up."""
        return f"nothing more about {query}"

    def always_the_tool(body: dict[str, Any]) -> ToolCalls:
        return ToolCalls([("lookup", {"query": user_texts(body)[-1]})])

    questions = ["What is a quasar?", "Who built the pyramids?", "Why is the sky blue?"]
    with openai_stand_in(always_the_tool) as server:
        client = openai_client(server)
        tool = FunctionTool(lookup, description="Look something up.")
        async with AUNRuntime() as runtime:
            await runtime.register_agent(
                AID, from_agentchat(lambda: AssistantAgent("assistant", model_client=client, tools=[tool], max_tool_iterations=40))
            )
            inbox = await runtime.open_inbox()
            for question in questions:
                await inbox.send(AID, question)
            await runtime.settle()
            asked = Counter(user_texts(body)[-1] for body in server.requests)
            assert asked == {question: DEFAULT_BUDGETS.model_calls_per_thread for question in questions}
            stops = runtime.archive.records(kinds=[RecordKind.BUDGET_STOP])
            assert [stop.message.text for stop in stops if stop.message] == questions
            assert all("model_calls_per_thread=8" in (stop.reason or "") for stop in stops)
            assert runtime.stats.budget_stops == 3 and runtime.stats.dead_letters == 0
            assert sent_by(runtime, AID) == []  # no turn got as far as an answer
        await client.close()
