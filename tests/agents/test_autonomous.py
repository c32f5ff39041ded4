"""The autonomous model agent: the model thinks in text, speaks only through send tools, and its cost
is bounded by code whatever shape the model takes.

The model is the only stand-in: a loopback OpenAI-compatible server answering over real HTTP through
autogen-ext's OpenAI client (the shapes are in tests/models/model_shapes.py), or, where a test needs
to script a conversation turn by turn, the deterministic scripted client.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from autogen_core.models import ChatCompletionClient, CreateResult
from autogen_core.tools import FunctionTool

from agents.autonomous import AutonomousAgent, FunctionCallingRequiredError
from aun_runtime import (
    AUNActorRuntime,
    AUNMessage,
    AUNRuntime,
    Budgets,
    RecordKind,
    ToolCallPayload,
    ToolResultPayload,
)
from aun_runtime.models import (
    ModelRequest,
    ScriptedChatCompletionClient,
    function_calls,
    model_client_from_env,
)
from tests.models import model_shapes
from tests.models.openai_stand_in import OpenAIStandIn, openai_stand_in

MEMBERS = [f"m{n}.local" for n in range(5)]


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[dict[str, Any]], Any]], OpenAIStandIn]]:
    """``server = serve(shape)``: a stand-in server answering with ``shape``, closed after the test."""
    servers: list[Any] = []

    def start(shape: Callable[[dict[str, Any]], Any]) -> OpenAIStandIn:
        context = openai_stand_in(shape)
        servers.append(context)
        return context.__enter__()

    yield start
    for context in servers:
        context.__exit__(None, None, None)


def openai_client(server: OpenAIStandIn) -> ChatCompletionClient:
    env = {"AUN_MODEL": "stand-in", "AUN_MODEL_BASE_URL": server.base_url, "AUN_MODEL_API_KEY": "sk-local"}
    return model_client_from_env(environ=env)


async def broadcast_group(model: ChatCompletionClient, **options: Any) -> tuple[AUNRuntime, Any]:
    runtime = AUNRuntime()
    for aid in MEMBERS:
        await runtime.register_agent(aid, lambda: AutonomousAgent(model, **options))
    human = await runtime.open_inbox("alice.local")
    await runtime.create_group("room", [*MEMBERS, "alice.local"])
    await runtime.start()
    return runtime, human


def sent(runtime: AUNRuntime, by: str | None = None) -> list[AUNMessage]:
    records = runtime.archive.records(kinds=[RecordKind.SENT])
    return [r.message for r in records if r.message is not None and (by is None or r.message.from_aid == by)]


def thoughts(runtime: AUNRuntime, aid: str) -> list[str]:
    return [r.text or "" for r in runtime.archive.records(kinds=[RecordKind.THOUGHT]) if r.owner == aid]


def requests_of(server: OpenAIStandIn, aid: str) -> list[dict[str, Any]]:
    return [body for body in server.requests if model_shapes.asker(body) == aid]


def test_a_model_without_function_calling_is_refused_and_pointed_to_the_observer() -> None:
    model = ScriptedChatCompletionClient(
        lambda r: "hi",
        model_info={
            "vision": False,
            "function_calling": False,
            "json_output": False,
            "family": "unknown",
            "structured_output": False,
        },
    )
    with pytest.raises(FunctionCallingRequiredError, match="ObserverAgent"):
        AutonomousAgent(model)


async def test_what_the_model_writes_is_thought_and_never_sent(serve: Any) -> None:
    server = serve(model_shapes.always_answers)
    runtime, human = await broadcast_group(openai_client(server))

    await human.group_send("room", "Who has seen the new dashboard?")
    await runtime.settle()

    assert sent(runtime) == sent(runtime, "alice.local")  # only the human's message went anywhere
    assert len(server.requests) == 5  # one turn each, one model call each
    assert all(body["tools"] for body in server.requests)  # the send tools were offered
    for aid in MEMBERS:
        assert model_shapes.ALWAYS in thoughts(runtime, aid)
    assert not any(model_shapes.ALWAYS in (m.text or "") for m in sent(runtime))
    await runtime.close()


async def test_a_model_that_always_replies_twice_is_held_to_one_unaddressed_reply(serve: Any) -> None:
    server = serve(model_shapes.replies_twice)
    runtime, human = await broadcast_group(openai_client(server))

    question = await human.group_send("room", "Anyone around?")
    await runtime.settle()

    # Nobody was addressed: each member's first reply goes out, its second is a budget stop, and
    # the other members' replies cost no model call at all (an answer to them could not go out).
    assert len(server.requests) == 5
    replies = [m for m in sent(runtime) if m.from_aid != "alice.local"]
    assert sorted(m.from_aid for m in replies) == MEMBERS
    assert all(m.text == "First thought." and m.in_reply_to == question.message_id for m in replies)
    assert runtime.stats.budget_stops == 5 and runtime.stats.dead_letters == 0

    # Asked directly, an agent may say both things.
    await human.send("m0.local", "And you, m0?")
    await runtime.settle()
    assert [m.text for m in human.received if m.to == "alice.local"] == ["First thought.", "And another."]
    assert len(server.requests) == 6
    await runtime.close()


async def test_a_model_that_stays_silent_sends_nothing(serve: Any) -> None:
    server = serve(model_shapes.silent)
    runtime, human = await broadcast_group(openai_client(server))

    await human.group_send("room", "Anything to add?")
    await human.send("m1.local", "You?")
    await runtime.settle()

    assert len(sent(runtime)) == 2 and len(server.requests) == 6
    assert "__SILENT__" in thoughts(runtime, "m1.local")
    await runtime.close()


def lookup_tool(calls: list[str]) -> FunctionTool:
    async def lookup(query: str) -> str:
        """Look something up."""
        calls.append(query)
        return f"found {len(calls)} results"

    return FunctionTool(lookup, description="Look something up in the wiki.")


async def test_local_tool_use_is_bounded_per_turn_and_shown_as_annotations(serve: Any) -> None:
    server = serve(model_shapes.uses_tool_forever("lookup"))
    client = openai_client(server)
    calls: list[str] = []
    runtime = AUNRuntime()
    await runtime.register_agent("tooly.local", lambda: AutonomousAgent(client, tools=[lookup_tool(calls)]))
    await runtime.register_agent("watcher.local", lambda: AutonomousAgent(client))
    human = await runtime.open_inbox("alice.local")
    await runtime.create_group("room", ["tooly.local", "watcher.local", "alice.local"])
    await runtime.start()

    question = await human.group_send("room", "tooly, look it up", mentions=["tooly.local"])
    await runtime.settle()

    # The tool really ran, once per model call, and the turn ended at max_rounds.
    assert len(requests_of(server, "tooly.local")) == 4 and calls == ["more"] * 4
    assert any("max_rounds" in t for t in thoughts(runtime, "tooly.local"))
    # Each use went to the conversation as the agent's own annotations, a call and its result.
    annotations = sent(runtime, "tooly.local")
    kinds = [type(m.payload) for m in annotations]
    assert kinds == [ToolCallPayload, ToolResultPayload] * 4
    assert all(m.group_id == "room" and m.in_reply_to == question.message_id for m in annotations)
    first_call, first_result = annotations[0].payload, annotations[1].payload
    assert isinstance(first_call, ToolCallPayload) and isinstance(first_result, ToolResultPayload)
    assert first_call.name == "lookup" and first_call.arguments == {"query": "more"}
    assert (
        first_result.call_id == first_call.call_id
        and first_result.ok
        and first_result.result == "found 1 results"
    )
    # The watcher received all eight and spent no model call on them: only the question asked it.
    received = [r for r in runtime.archive.records(kinds=[RecordKind.RECEIVED]) if r.owner == "watcher.local"]
    assert len(received) == 1 + 8
    assert len(requests_of(server, "watcher.local")) == 1
    await runtime.close()


async def test_a_local_tool_that_hangs_is_cut_off_and_the_model_is_told(serve: Any) -> None:
    server = serve(model_shapes.uses_tool_forever("wait_for_it"))
    client = openai_client(server)
    started: list[str] = []

    async def wait_for_it(query: str) -> str:
        """Waits for an answer that never comes."""
        started.append(query)
        await asyncio.Event().wait()
        return "never"

    tool = FunctionTool(wait_for_it, description="Waits for an answer.")
    async with AUNRuntime() as runtime:
        await runtime.register_agent(
            "tooly.local", lambda: AutonomousAgent(client, tools=[tool], tool_timeout=0.2, max_rounds=2)
        )
        human = await runtime.open_inbox("alice.local")
        await human.send("tooly.local", "look it up")
        await runtime.settle()

    timed_out = "TimeoutError: the tool wait_for_it timed out after 0.2 s (tool_timeout)"
    assert len(started) == 2  # each round's call was cut off, and the turn went on to its next round
    # What the model was shown on its second round: an error result that says it timed out.
    second = requests_of(server, "tooly.local")[1]["messages"]
    [tool_message] = [m for m in second if m["role"] == "tool"]
    assert tool_message["content"] == timed_out
    results = [m.payload for m in sent(runtime, "tooly.local") if isinstance(m.payload, ToolResultPayload)]
    assert [(r.ok, r.error) for r in results] == [(False, timed_out)] * 2
    assert runtime.stats.dead_letters == 0


async def test_annotations_can_be_turned_off(serve: Any) -> None:
    server = serve(model_shapes.uses_tool_forever("lookup"))
    calls: list[str] = []
    async with AUNRuntime() as runtime:
        await runtime.register_agent(
            "tooly.local",
            lambda: AutonomousAgent(
                openai_client(server), tools=[lookup_tool(calls)], annotate_tools=False, max_rounds=2
            ),
        )
        human = await runtime.open_inbox()
        await human.send("tooly.local", "look it up")
        await runtime.settle()
        assert calls == ["more"] * 2 and sent(runtime, "tooly.local") == []


async def test_model_budgets_stop_a_model_that_would_go_on_forever(serve: Any) -> None:
    server = serve(model_shapes.uses_tool_forever("lookup"))
    calls: list[str] = []
    async with AUNRuntime() as runtime:
        await runtime.register_agent(
            "tooly.local",
            lambda: AutonomousAgent(openai_client(server), tools=[lookup_tool(calls)], max_rounds=10),
            budgets=Budgets(model_calls_per_thread=3),
        )
        human = await runtime.open_inbox()
        question = await human.send("tooly.local", "look it up")
        await runtime.settle()

        assert len(server.requests) == 3 and len(calls) == 3
        [stop] = runtime.archive.records(kinds=[RecordKind.BUDGET_STOP])
        assert stop.owner == "tooly.local" and "model_calls_per_thread=3" in (stop.reason or "")
        assert stop.message is not None and stop.message.message_id == question.message_id
        assert runtime.stats.budget_stops == 1 and runtime.stats.dead_letters == 0
        # Tokens are counted from what the server reported: 10 per call.
        assert runtime.ledger.model_use("tooly.local", question.message_id) == (3, 30)


async def test_the_window_budget_holds_across_threads(serve: Any) -> None:
    server = serve(model_shapes.always_answers)
    async with AUNRuntime(budgets=Budgets(model_calls_per_window=2, window=3600)) as runtime:
        await runtime.register_agent("busy.local", lambda: AutonomousAgent(openai_client(server)))
        human = await runtime.open_inbox()
        for n in range(5):
            await human.send("busy.local", f"question {n}")
        await runtime.settle()
        assert len(server.requests) == 2
        assert runtime.stats.budget_stops == 3


def scripted(
    respond: Callable[[ModelRequest], str | list[tuple[str, dict[str, Any]]]],
) -> ScriptedChatCompletionClient:
    """A scripted model whose answer is text, or a list of (tool, arguments) calls."""

    def answer(request: ModelRequest) -> str | CreateResult:
        said = respond(request)
        if isinstance(said, str):
            return said
        return function_calls(*said)

    return ScriptedChatCompletionClient(answer)


async def test_a_follow_up_is_a_proactive_turn_in_the_same_thread() -> None:
    def respond(request: ModelRequest) -> str | list[tuple[str, dict[str, Any]]]:
        if "follow-up is due" in request.last_text:
            return [("reply", {"text": "Done, as promised."})]
        return [("reply", {"text": "On it."}), ("follow_up", {"after_seconds": 0.05, "note": "report back"})]

    model = scripted(respond)
    async with AUNRuntime() as runtime:
        await runtime.register_agent("worker.local", lambda: AutonomousAgent(model))
        human = await runtime.open_inbox()
        question = await human.send("worker.local", "Please check the build.")
        await runtime.settle()
        assert [m.text for m in human.received] == ["On it."]

        for _ in range(200):
            if len(human.received) == 2:
                break
            await asyncio.sleep(0.01)
        later = human.received[1]
        assert later.text == "Done, as promised."
        assert later.thread == question.message_id and later.in_reply_to == question.message_id
        assert "report back" in model.requests[-1].last_text
        assert len(model.requests) == 2


async def test_a_follow_up_past_the_limit_is_refused_to_the_model() -> None:
    def respond(request: ModelRequest) -> str | list[tuple[str, dict[str, Any]]]:
        return [
            ("follow_up", {"after_seconds": 60, "note": "one"}),
            ("follow_up", {"after_seconds": 60, "note": "two"}),
        ]

    model = scripted(respond)
    async with AUNRuntime() as runtime:
        await runtime.register_agent("worker.local", lambda: AutonomousAgent(model))
        human = await runtime.open_inbox()
        await human.send("worker.local", "ping me later")
        await runtime.settle()
        agent = await runtime.agent_instance("worker.local", AutonomousAgent)
        assert not agent.evictable  # a waiting follow-up keeps it in memory
        outcome = agent.last_request  # the refused follow-up ended the turn: nothing to correct
        assert len(model.requests) == 1 and outcome
        await runtime.stop()


async def test_a_mistake_the_model_can_correct_gets_another_round() -> None:
    def respond(request: ModelRequest) -> str | list[tuple[str, dict[str, Any]]]:
        if "no agent nobody.local" in json.dumps(request.data):
            return [("send_message", {"to": "app.local", "text": "Found you."})]
        return [("send_message", {"to": "nobody.local", "text": "Hello?"})]

    model = scripted(respond)
    async with AUNRuntime() as runtime:
        await runtime.register_agent("worker.local", lambda: AutonomousAgent(model))
        human = await runtime.open_inbox()
        await human.send("worker.local", "say hello")
        await runtime.settle()
        assert [m.text for m in human.received] == ["Found you."]
        assert len(model.requests) == 2
        assert runtime.stats.dead_letters == 1  # the message to nobody.local, recorded


def remembering_model() -> ScriptedChatCompletionClient:
    return scripted(lambda request: [("reply", {"text": f"Noted: {request.last_text.splitlines()[-1]}"})])


async def _wait_for_eviction(core: AUNActorRuntime) -> None:
    for _ in range(500):
        if core.evicted:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the idle agent was never evicted")


def memory_of(request: ModelRequest) -> str:
    return "\n".join(str(m.content) for m in request.messages)


async def test_the_conversation_survives_idle_eviction() -> None:
    model = remembering_model()
    core = AUNActorRuntime(idle_timeout=0.05)
    async with AUNRuntime(core=core) as runtime:
        await runtime.register_agent("scribe.local", lambda: AutonomousAgent(model))
        human = await runtime.open_inbox()
        await human.send("scribe.local", "My name is Ada.")
        await runtime.settle()
        first = await runtime.agent_instance("scribe.local", AutonomousAgent)
        await _wait_for_eviction(core)

        await human.send("scribe.local", "What is my name?")
        await runtime.settle()
        assert await runtime.agent_instance("scribe.local", AutonomousAgent) is not first
        memory = memory_of(model.requests[-1])
        assert "[app.local, direct with app.local, to you] My name is Ada." in memory
        assert "[you, direct with app.local, to app.local] Noted: My name is Ada." in memory


async def test_the_conversation_survives_a_restart_on_the_same_archive(tmp_path: Path) -> None:
    archive = tmp_path / "archive.sqlite"
    model = remembering_model()
    runtime = AUNRuntime(archive=archive)
    await runtime.register_agent("scribe.local", lambda: AutonomousAgent(model))
    human = await runtime.open_inbox()
    await runtime.start()
    await human.send("scribe.local", "The deploy is on Friday.")
    await runtime.settle()
    await runtime.close()

    runtime = AUNRuntime(archive=archive)
    await runtime.register_agent("scribe.local", lambda: AutonomousAgent(model))
    human = await runtime.open_inbox()
    await runtime.start()
    await human.send("scribe.local", "When is the deploy?")
    await runtime.settle()
    assert "The deploy is on Friday." in memory_of(model.requests[-1])
    await runtime.close()


async def test_the_context_stays_within_its_token_budget() -> None:
    model = remembering_model()
    async with AUNRuntime() as runtime:
        await runtime.register_agent("scribe.local", lambda: AutonomousAgent(model, context_tokens=100))
        human = await runtime.open_inbox()
        for n in range(30):
            await human.send("scribe.local", f"fact number {n} " + "x" * 40)
        await runtime.settle()
        memory = str(model.requests[-1].messages[1].content)
        assert len(memory) <= 100 * 4 + 60  # the budget, plus the heading
        assert "fact number 28" in memory and "fact number 0 " not in memory
