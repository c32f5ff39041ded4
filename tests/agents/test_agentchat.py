"""The agentchat adapter: a real AssistantAgent, with the real OpenAI client, as an AUN agent.

The model is the only stand-in: a loopback OpenAI-compatible server (tests/models/openai_stand_in.py)
answers over real HTTP and keeps every request, so each test can check what the assistant showed it.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent, UserProxyAgent
from autogen_core import CancellationToken, FunctionCall
from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    FunctionExecutionResultMessage,
    RequestUsage,
)
from autogen_core.tools import FunctionTool

from agents.agentchat import AgentChatAgent, SendToolOutsideATurnError, from_agentchat, send_tools
from agents.autonomous import AutonomousAgent
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
from aun_runtime.base._topics import inbox_topic
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
        # What a gateway does when it echoes a member's own post back: its inbox topic, no sender.
        echo = AUNMessage(from_aid=AID, group_id="team", payload=TextPayload(text="my own words"))
        await runtime.core.publish_message(echo, inbox_topic(AID))
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


def weather(city: str) -> str:
    """Today's temperature in a city."""
    return f"21 degrees in {city}"


WEATHER = FunctionTool(weather, description="Today's temperature in a city.")


def weather_assistant(**options: Any) -> Callable[[], AgentChatAgent]:
    """An assistant whose model calls the weather tool, then answers in words."""
    model = _weather_model()
    return from_agentchat(
        lambda: AssistantAgent("assistant", model_client=model, tools=[WEATHER], reflect_on_tool_use=True),
        **options,
    )


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


async def test_tool_use_is_thought_shown_as_annotations_and_every_call_is_counted() -> None:
    async with AUNRuntime() as runtime:
        await runtime.register_agent(AID, weather_assistant())
        inbox = await runtime.open_inbox()
        question = await inbox.send(AID, "How warm is it in Paris?")
        await runtime.settle()
        # The asker sees the tool's use as the autonomous agent shows it, then the answer in words.
        [call, result, answer] = inbox.received
        assert call.payload == ToolCallPayload(call_id="call-1", name="weather", arguments={"city": "Paris"})
        assert result.payload == ToolResultPayload(call_id="call-1", ok=True, result="21 degrees in Paris")
        assert answer.text == "It is 21 degrees in Paris."
        assert all(m.in_reply_to == question.message_id and m.from_aid == AID for m in inbox.received)
        [request, execution] = thoughts(runtime, AID)
        assert request.startswith("assistant ToolCallRequestEvent: ") and '"city": "Paris"' in request
        assert (
            execution.startswith("assistant ToolCallExecutionEvent: ") and "21 degrees in Paris" in execution
        )
        agent = await runtime.agent_instance(AID, AgentChatAgent)
        assert agent.model_turns == 1 and agent.tokens_used == (30 + 5) + (40 + 8)


async def test_tool_annotations_can_be_turned_off() -> None:
    async with AUNRuntime() as runtime:
        await runtime.register_agent(AID, weather_assistant(annotate_tools=False))
        inbox = await runtime.open_inbox()
        await inbox.send(AID, "How warm is it in Paris?")
        await runtime.settle()
        assert [m.text for m in inbox.received] == ["It is 21 degrees in Paris."]
        assert len(thoughts(runtime, AID)) == 2  # the tool use is still thought


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
            said = [r.message for r in runtime.archive.history(AID, kinds=[RecordKind.SENT]) if r.message]
            assert all(isinstance(m.payload, ToolCallPayload | ToolResultPayload) for m in said)
            assert len(said) == 3 * 2 * DEFAULT_BUDGETS.model_calls_per_thread  # each round's use shown
            # ...and no turn got as far as an answer
        await client.close()


# -- speaking beyond the reply: the send tools ---------------------------------------------------

ASK_DB = "Ask db.local when the last backup ran."


def _last_is_a_tool_result(body: dict[str, Any]) -> bool:
    return body["messages"][-1]["role"] == "tool"


def _tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def calls_then_says(calls: list[tuple[str, dict[str, Any]]], text: str) -> Callable[[dict[str, Any]], str | ToolCalls]:
    """A model that calls `calls` first and, once it sees their results, says `text`."""

    def model(body: dict[str, Any]) -> str | ToolCalls:
        return text if _last_is_a_tool_result(body) else ToolCalls(calls)

    return model


def sender(client: ChatCompletionClient, **options: Any) -> Callable[[], AgentChatAgent]:
    """An assistant with the send tools and a weather tool of its own."""
    return from_agentchat(
        lambda: AssistantAgent("assistant", model_client=client, tools=[*send_tools(), WEATHER], **options)
    )


async def test_the_assistant_sends_to_another_aid_in_the_thread_of_the_question() -> None:
    model = calls_then_says(
        [("send_message", {"to": "db.local", "text": "When did the last backup run?"})],
        "I asked db.local; its answer will come to me.",
    )
    with openai_stand_in(model) as server:
        client = openai_client(server)
        async with AUNRuntime() as runtime:
            await runtime.register_agent(AID, sender(client, reflect_on_tool_use=True))
            app = await runtime.open_inbox()
            db = await runtime.open_inbox("db.local")
            question = await app.send(AID, ASK_DB)
            await runtime.settle()
            [asked] = db.received
            assert asked.from_aid == AID and asked.text == "When did the last backup run?"
            # One hop further in the question's thread: its budgets and hop guard hold for it.
            assert asked.in_reply_to == question.message_id and asked.thread == question.thread
            assert asked.hops == question.hops + 1
            # The model's final text is still the reply; a send tool's use is the message it sent.
            assert [m.text for m in app.received] == ["I asked db.local; its answer will come to me."]
            assert [m.text for m in (r.message for r in runtime.archive.history(AID, kinds=[RecordKind.SENT])) if m] == [
                "When did the last backup run?",
                "I asked db.local; its answer will come to me.",
            ]
            [result] = _tool_results(server.requests[1])
            assert result.startswith("sent (message ")
        # The model sees the autonomous agent's own send tools, word for word.
        offered = {tool["function"]["name"]: tool["function"] for tool in server.requests[0]["tools"]}
        autonomous = {schema["name"]: schema for schema in AutonomousAgent(client).send_tools}
        for name in ("send_message", "post_to_group"):
            assert offered[name]["description"] == autonomous[name]["description"]
            assert offered[name]["parameters"]["properties"] == autonomous[name]["parameters"]["properties"]
        assert "reply" not in offered and "follow_up" not in offered  # the final text is the reply
        await client.close()


async def test_the_assistant_posts_to_a_group_with_mentions() -> None:
    posting = ("post_to_group", {"group_id": "ops", "text": "Deploy done.", "mentions": ["bob.local"]})
    with openai_stand_in(calls_then_says([posting], "Told bob in #ops.")) as server:
        client = openai_client(server)
        async with AUNRuntime() as runtime:
            await runtime.register_agent(AID, sender(client, reflect_on_tool_use=True))
            app = await runtime.open_inbox()
            alice = await runtime.open_inbox("alice.local")
            bob = await runtime.open_inbox("bob.local")
            await runtime.create_group("ops", [AID, "alice.local", "bob.local"], dispatch_mode="mention")
            question = await app.send(AID, "Tell bob in #ops that the deploy is done.")
            await runtime.settle()
            [post] = bob.received
            assert post.group_id == "ops" and post.text == "Deploy done." and post.mentions_aid("bob.local")
            assert post.in_reply_to == question.message_id
            assert alice.received == []  # a mention group: only those named see it
            assert [m.text for m in app.received] == ["Told bob in #ops."]
        await client.close()


async def test_a_send_the_runtime_refuses_is_an_error_result_the_model_reads() -> None:
    hello = ("send_message", {"to": "nobody.local", "text": "hello?"})
    with openai_stand_in(calls_then_says([hello], "I could not reach them.")) as server:
        client = openai_client(server)
        async with AUNRuntime() as runtime:
            await runtime.register_agent(AID, sender(client, reflect_on_tool_use=True))
            app = await runtime.open_inbox()
            await app.send(AID, "Say hello to nobody.local.")
            await runtime.settle()
            [result] = _tool_results(server.requests[1])
            assert result.startswith("not sent: ") and "nobody.local" in result
            assert [m.text for m in app.received] == ["I could not reach them."]
            [execution] = [t for t in thoughts(runtime, AID) if "ToolCallExecutionEvent" in t]
            assert "is_error=True" in execution
        await client.close()


async def test_budgets_bound_an_assistant_that_sends_without_end() -> None:
    """A model that calls send_message on every round, allowed twenty rounds: the thread's budget
    stops its sends (the model reads why), and the model budget then ends the turn."""

    def model(body: dict[str, Any]) -> ToolCalls:
        return ToolCalls([("send_message", {"to": "db.local", "text": f"ping {len(_tool_results(body))}"})])

    with openai_stand_in(model) as server:
        client = openai_client(server)
        async with AUNRuntime() as runtime:
            await runtime.register_agent(
                AID,
                sender(client, max_tool_iterations=20),
                budgets=Budgets(thread_messages=4, model_calls_per_thread=6),
            )
            app = await runtime.open_inbox()
            db = await runtime.open_inbox("db.local")
            await app.send(AID, ASK_DB)
            await runtime.settle()
            # The question and three sends fill the thread's four messages; the rest are refused.
            assert [m.text for m in db.received] == ["ping 0", "ping 1", "ping 2"]
            assert len(server.requests) == 6  # the seventh call was refused before it was made
            # The model read each refusal (the last request shows the results of the five calls before it).
            refused = _tool_results(server.requests[-1])[3:]
            assert len(refused) == 2
            assert all(r.startswith("not sent: ") and "thread_messages=4" in r for r in refused)
            reasons = [stop.reason or "" for stop in runtime.archive.records(kinds=[RecordKind.BUDGET_STOP])]
            assert sum("thread_messages=4" in reason for reason in reasons) == 6 - 3  # one per refused send
            assert sum("model_calls_per_thread=6" in reason for reason in reasons) == 1
            assert app.received == [] and runtime.stats.dead_letters == 0  # the turn ended at the budget
        await client.close()


async def test_without_reflection_a_turn_that_only_sent_replies_nothing_more() -> None:
    """agentchat's default (reflect_on_tool_use=False) answers with a summary of the tool results:
    the send tools' lines are left out, a local tool's result is still the answer."""

    def model(body: dict[str, Any]) -> ToolCalls:
        if user_texts(body)[-1] == ASK_DB:
            return ToolCalls([("send_message", {"to": "db.local", "text": "When did the last backup run?"})])
        return ToolCalls([("send_message", {"to": "db.local", "text": "Warm today?"}), ("weather", {"city": "Paris"})])

    with openai_stand_in(model) as server:
        client = openai_client(server)
        async with AUNRuntime() as runtime:
            await runtime.register_agent(AID, sender(client))
            app = await runtime.open_inbox()
            db = await runtime.open_inbox("db.local")
            await app.send(AID, ASK_DB)
            await runtime.settle()
            assert [m.text for m in db.received] == ["When did the last backup run?"]
            assert app.received == []
            assert thoughts(runtime, AID)[-1] == "no reply to app.local's message: it spoke with send_message"

            await app.send(AID, "How warm is it in Paris, and does db.local know?")
            await runtime.settle()
            assert [m.text for m in db.received][-1] == "Warm today?"
            # The weather tool's use is shown, the send tool's is not; the answer is the weather alone.
            kinds = [m.payload.type for m in app.received]
            assert kinds == ["tool_call", "tool_result", "text"]
            assert app.received[0].payload == ToolCallPayload(
                call_id=app.received[0].payload.call_id, name="weather", arguments={"city": "Paris"}  # type: ignore[union-attr]
            )
            assert app.received[-1].text == "21 degrees in Paris"
        await client.close()


async def test_a_send_tool_outside_a_turn_says_why_it_cannot_speak() -> None:
    [send_message, _] = send_tools()
    with pytest.raises(SendToolOutsideATurnError, match="runs only while one handles a message"):
        await send_message.run_json({"to": "db.local", "text": "hi"}, CancellationToken())


# -- a person through agentchat's UserProxyAgent -------------------------------------------------

PERSON = "person.local"


class Person:
    """What a person at a UserProxyAgent types, scripted: answers by question, and every prompt shown."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.prompts: list[str] = []
        self.tokens: list[CancellationToken | None] = []

    async def answer(self, prompt: str, token: CancellationToken | None) -> str:
        self.prompts.append(prompt)
        self.tokens.append(token)
        for question, answer in self.answers.items():
            if question in prompt:
                return answer
        await asyncio.Event().wait()  # no answer: the person is away
        raise AssertionError("unreachable")


async def test_a_user_proxy_is_a_person_who_sees_the_message_and_answers() -> None:
    person = Person({"Deploy now?": "yes, go ahead", "Lunch?": "   ", "FYI": "__SILENT__"})
    async with AUNRuntime() as runtime:
        await runtime.register_agent(PERSON, from_agentchat(lambda: UserProxyAgent("person", input_func=person.answer)))
        app = await runtime.open_inbox()
        question = await app.send(PERSON, "Deploy now?")
        answer = await app.next(timeout=10)
        assert answer is not None and answer.text == "yes, go ahead"
        assert answer.from_aid == PERSON and answer.in_reply_to == question.message_id
        await app.send(PERSON, "Lunch?")
        await app.send(PERSON, "FYI: the build is green")
        await runtime.settle()
        assert [m.text for m in app.received] == ["yes, go ahead"]  # a blank line and the marker are silence
        assert person.prompts == [
            "app.local: Deploy now?\nEnter your response: ",
            "app.local: Lunch?\nEnter your response: ",
            "app.local: FYI: the build is green\nEnter your response: ",
        ]
        assert thoughts(runtime, PERSON) == [
            "silent on app.local's message: person gave an empty answer",
            "silent on app.local's message",
        ]


async def test_a_person_in_a_mention_group_answers_the_asker() -> None:
    person = Person({"can you approve": "approved"})
    async with AUNRuntime() as runtime:
        await runtime.register_agent(PERSON, from_agentchat(lambda: UserProxyAgent("person", input_func=person.answer)))
        alice = await runtime.open_inbox("alice.local")
        await runtime.open_inbox("bob.local")
        await runtime.create_group("ops", [PERSON, "alice.local", "bob.local"], dispatch_mode="mention")
        await alice.group_send("ops", "person, can you approve the release?", mentions=[PERSON])
        await runtime.settle()
        assert person.prompts == ["#ops alice.local: person, can you approve the release?\nEnter your response: "]
        [reply] = alice.received
        assert reply.group_id == "ops" and reply.text == "approved" and reply.mentions_aid("alice.local")


async def test_a_person_who_does_not_answer_in_time_has_said_nothing_and_the_next_message_is_asked() -> None:
    person = Person({"second": "here now"})
    async with AUNRuntime() as runtime:
        await runtime.register_agent(
            PERSON, from_agentchat(lambda: UserProxyAgent("person", input_func=person.answer), input_timeout=0.2)
        )
        app = await runtime.open_inbox()
        await app.send(PERSON, "first question")
        await app.send(PERSON, "second question")
        await runtime.settle()
        assert [m.text for m in app.received] == ["here now"]
        assert thoughts(runtime, PERSON) == [
            "silent on app.local's message: no answer from the person within 0.2 s (input_timeout)"
        ]
        first_token = person.tokens[0]
        assert first_token is not None and first_token.is_cancelled()  # what it started is told to stop
        assert runtime.stats.dead_letters == 0


async def test_a_plain_input_function_that_never_returns_is_given_up_on() -> None:
    released = threading.Event()
    prompts: list[str] = []

    def stuck(prompt: str) -> str:
        prompts.append(prompt)
        if "second" in prompt:
            return "ok"
        released.wait(30)  # a person who never presses Enter (released when the test ends)
        return "too late"

    try:
        async with AUNRuntime() as runtime:
            await runtime.register_agent(
                PERSON, from_agentchat(lambda: UserProxyAgent("person", input_func=stuck), input_timeout=0.2)
            )
            app = await runtime.open_inbox()
            await app.send(PERSON, "first question")
            await app.send(PERSON, "second question")
            await runtime.settle()
            assert [m.text for m in app.received] == ["ok"]
            assert len(prompts) == 2
            assert "no answer from the person within 0.2 s" in thoughts(runtime, PERSON)[0]
    finally:
        released.set()


async def test_the_handler_timeout_still_bounds_a_persons_turn() -> None:
    person = Person({})
    async with AUNRuntime() as runtime:
        await runtime.register_agent(
            PERSON,
            from_agentchat(lambda: UserProxyAgent("person", input_func=person.answer), input_timeout=60),
            handler_timeout=0.3,
        )
        app = await runtime.open_inbox()
        await app.send(PERSON, "anyone?")
        await runtime.settle()
        [dead] = runtime.archive.records(kinds=[RecordKind.DEAD_LETTER])
        assert "handler_timeout of 0.3 s" in (dead.reason or "")
        assert runtime.stats.handler_timeouts == 1
        [token] = person.tokens
        assert token is not None and token.is_cancelled()


async def test_an_input_function_that_fails_makes_a_dead_letter_that_says_why() -> None:
    def broken(prompt: str) -> str:
        raise OSError("the answer box is gone")

    async with AUNRuntime() as runtime:
        await runtime.register_agent(PERSON, from_agentchat(lambda: UserProxyAgent("person", input_func=broken)))
        app = await runtime.open_inbox()
        await app.send(PERSON, "anyone?")
        await runtime.settle()
        [dead] = runtime.archive.records(kinds=[RecordKind.DEAD_LETTER])
        assert "OSError: the answer box is gone" in (dead.reason or "")


def test_an_input_timeout_is_a_positive_number_of_seconds() -> None:
    with pytest.raises(ValueError, match="input_timeout is a positive number of seconds"):
        AgentChatAgent(lambda: UserProxyAgent("person"), input_timeout=0)


async def test_a_team_factory_is_refused_at_registration_with_what_to_do() -> None:
    from autogen_agentchat.teams import RoundRobinGroupChat

    from agents.agentchat import NotAChatAgentError

    client = ScriptedChatCompletionClient(lambda request: "hi")
    team = lambda: RoundRobinGroupChat([AssistantAgent("a", model_client=client), AssistantAgent("b", model_client=client)])  # noqa: E731
    with pytest.raises(NotAChatAgentError, match=r"made a team \(RoundRobinGroupChat\).*SocietyOfMindAgent"):
        from_agentchat(team)
    made: list[AssistantAgent] = []

    def one() -> AssistantAgent:
        made.append(AssistantAgent("one", model_client=client))
        return made[-1]

    maker = from_agentchat(one)
    assert len(made) == 1  # checked at once; the agent made then serves the first instance
    assert maker().chat_agent is made[0] and len(made) == 1
