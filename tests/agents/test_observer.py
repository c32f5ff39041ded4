"""The observer: the code layer's filters, marker handling, the behaviour table, mention folding."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agents.observer import ObserverAgent
from agents.stand_ins.observer import DEMO_OBSERVERS, ObserverStandIn
from aun_runtime import AUNMessage, AUNRuntime, Budgets, RecordKind, TextPayload
from aun_runtime.base._topics import inbox_topic
from aun_runtime.models import ModelRequest, ScriptedChatCompletionClient


def sent_by(runtime: AUNRuntime, aid: str) -> list[str]:
    return [r.text or "" for r in runtime.archive.history(aid, kinds=[RecordKind.SENT])]


def thoughts(runtime: AUNRuntime, aid: str) -> list[str]:
    return [r.text or "" for r in runtime.archive.history(aid, kinds=[RecordKind.THOUGHT])]


async def group_with(
    client: ScriptedChatCompletionClient,
    observers: Sequence[str] = ("db.local",),
    *,
    mode: str = "broadcast",
    **options: object,
) -> tuple[AUNRuntime, object]:
    runtime = AUNRuntime()
    for aid in observers:
        await runtime.register_agent(aid, lambda: ObserverAgent(client, **options))  # type: ignore[arg-type]
    human = await runtime.open_inbox("alice.local")
    await runtime.open_inbox("bob.local")
    await runtime.create_group("team", [*observers, "alice.local", "bob.local"], dispatch_mode=mode)
    await runtime.start()
    return runtime, human


async def test_its_own_echoed_message_never_reaches_the_model() -> None:
    client = ScriptedChatCompletionClient(lambda r: "__REPLY__ echo!")
    runtime, _ = await group_with(client)
    # What a gateway does when it echoes a member's own post back: its inbox topic, no sender.
    echo = AUNMessage(from_aid="db.local", group_id="team", payload=TextPayload(text="my own words"))
    await runtime.core.publish_message(echo, inbox_topic("db.local"))
    await runtime.settle()
    assert client.requests == [] and sent_by(runtime, "db.local") == []
    await runtime.close()


async def test_senders_outside_the_allow_list_are_not_answered() -> None:
    client = ScriptedChatCompletionClient(lambda r: "__REPLY__ hello")
    runtime, human = await group_with(client, allow_from=["alice.local"])
    await runtime.group_send("team", "hi db, from bob", sender="bob.local")
    await runtime.settle()
    assert client.requests == []
    assert thoughts(runtime, "db.local") == ["not answering bob.local: not on the allow-list"]
    await human.group_send("team", "hi db, from alice")  # type: ignore[attr-defined]
    await runtime.settle()
    assert len(client.requests) == 1 and sent_by(runtime, "db.local") == ["hello"]
    await runtime.close()


async def test_broadcast_shows_every_message_to_every_observer_once() -> None:
    client = ScriptedChatCompletionClient(lambda r: "__SILENT__")
    runtime, human = await group_with(client, ("db.local", "ops.local"))
    await human.group_send("team", "no mention at all, just talk")  # type: ignore[attr-defined]
    await runtime.settle()
    askers = sorted(r.system.split(",")[0] for r in client.requests)
    assert askers == ["You are db.local", "You are ops.local"]  # one model call each, no @ filter
    await runtime.close()


SILENT_OUTPUTS = ["__SILENT__", "  __SILENT__ off topic", "`__SILENT__`", "**__SILENT__**", "Meh. __SILENT__"]
REPLY_OUTPUTS = [
    ("__REPLY__ Friday works.", "Friday works."),
    ("\n  **__REPLY__** Friday works.", "Friday works."),
    ("`__REPLY__` Friday works.", "Friday works."),
    ("Friday works.", "Friday works."),
]


@pytest.mark.parametrize("output", SILENT_OUTPUTS)
async def test_silence_sends_nothing_and_archives_the_decision(output: str) -> None:
    runtime, human = await group_with(ScriptedChatCompletionClient(lambda r: output))
    await human.group_send("team", "anything")  # type: ignore[attr-defined]
    await runtime.settle()
    assert sent_by(runtime, "db.local") == []
    [thought] = thoughts(runtime, "db.local")
    assert thought.startswith("silent on alice.local's message")
    assert runtime.stats.sent == 1  # only alice's
    await runtime.close()


@pytest.mark.parametrize(("output", "text"), REPLY_OUTPUTS)
async def test_replies_are_sent_without_their_marker(output: str, text: str) -> None:
    runtime, human = await group_with(ScriptedChatCompletionClient(lambda r: output))
    question = await human.group_send("team", "when?")  # type: ignore[attr-defined]
    await runtime.settle()
    [reply] = runtime.archive.history("db.local", kinds=[RecordKind.SENT])
    assert reply.text == text and reply.message is not None
    assert reply.message.group_id == "team" and reply.message.in_reply_to == question.message_id
    await runtime.close()


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        (["__SIL", "ENT__", " not mine"], None),
        (["  *", "*__S", "ILENT__**"], None),
        (["__RE", "PLY__ Fri", "day works."], "Friday works."),
        (["Friday", " works. __REP", "LY__"], "Friday works."),
    ],
)
async def test_streamed_markers_split_across_chunks_never_leak(
    chunks: list[str], expected: str | None
) -> None:
    runtime, human = await group_with(ScriptedChatCompletionClient(lambda r: chunks), stream=True)
    await human.group_send("team", "when?")  # type: ignore[attr-defined]
    await runtime.settle()
    assert sent_by(runtime, "db.local") == ([expected] if expected else [])
    await runtime.close()


async def test_a_silent_stream_is_cut_off_once_the_marker_is_complete() -> None:
    consumed: list[str] = []

    class CountingClient(ScriptedChatCompletionClient):
        async def create_stream(self, *args, **kwargs):  # type: ignore[no-untyped-def, override]
            async for item in super().create_stream(*args, **kwargs):
                consumed.append(str(item))
                yield item

    chunks = ["__SILENT__", " because", " this", " goes", " on", " and", " on"]
    runtime, human = await group_with(CountingClient(lambda r: chunks), stream=True)
    await human.group_send("team", "lunch?")  # type: ignore[attr-defined]
    await runtime.settle()
    assert consumed == ["__SILENT__"]
    assert sent_by(runtime, "db.local") == []
    await runtime.close()


async def test_mention_mode_costs_no_model_call_and_folds_the_talk_into_the_next_turn() -> None:
    client = ScriptedChatCompletionClient(lambda r: "__REPLY__ on it")
    runtime, human = await group_with(client, mode="mention")
    await human.group_send("team", "the orders page is slow today")  # type: ignore[attr-defined]
    await runtime.group_send("team", "bob: it started after the 9:00 import", sender="bob.local")
    await human.group_send("team", "ops, can you check the import job?", mentions=["ops.local"])  # type: ignore[attr-defined]
    await runtime.settle()
    assert client.requests == []  # unaddressed: not a single model call
    assert runtime.archive.count(owner="db.local", kind=RecordKind.FILTERED) == 3

    await human.group_send("team", "db, what do you make of it?", mentions=["db.local"])  # type: ignore[attr-defined]
    await runtime.settle()
    [request] = client.requests
    prompt = request.last_text
    for earlier in (
        "the orders page is slow today",
        "it started after the 9:00 import",
        "check the import job",
    ):
        assert earlier in prompt
    assert prompt.count("(not addressed to you)") == 3
    assert "addressed to you:\ndb, what do you make of it?" in prompt
    [reply] = runtime.archive.history("db.local", kinds=[RecordKind.SENT])
    assert reply.message is not None and reply.message.mentions_aid("alice.local")  # seen in mention mode
    await runtime.close()


def _who_spoke(runtime: AUNRuntime) -> list[tuple[str, str]]:
    records = runtime.archive.records(kinds=[RecordKind.SENT])
    return [(r.owner, r.text or "") for r in records]


async def test_the_behaviour_table_row_by_row() -> None:
    client = ScriptedChatCompletionClient(ObserverStandIn(dict(DEMO_OBSERVERS)))
    runtime, human = await group_with(client, ("db.local", "ops.local", "sre.local"))
    say = human.group_send  # type: ignore[attr-defined]
    db_answer = DEMO_OBSERVERS["db.local"].answer
    deploy = DEMO_OBSERVERS["ops.local"].answer

    async def step(text: str, mentions: list[str] | None = None) -> list[tuple[str, str]]:
        before = len(_who_spoke(runtime))
        await say("team", text, mentions=mentions)
        await runtime.settle()
        return [(aid, t) for aid, t in _who_spoke(runtime)[before:] if aid != "alice.local"]

    # Unrelated topic: everyone stays silent.
    assert await step("Lunch at noon, anyone?") == []
    # Unsure (on the topic of ops and sre, but nobody asks anything): silence.
    assert await step("The rollout dashboard has a new colour scheme.") == []
    assert any("nothing is being asked" in t for t in thoughts(runtime, "ops.local"))
    # Addressed: the one named replies; the others (not their topic) stay silent.
    assert await step("db, the orders query is slow. Any idea?", ["db.local"]) == [("db.local", db_answer)]
    # The conversation db is in goes on, unaddressed and without a question: db continues it.
    assert await step("Great, I will add the index then.") == [
        ("db.local", DEMO_OBSERVERS["db.local"].follow_up)
    ]
    # Addressed to ops: ops answers; sre, who knows the same, sees ops say it and stays silent.
    assert await step("ops, when is the deploy?", ["ops.local"]) == [("ops.local", deploy)]
    assert any("someone just made that point" in t for t in thoughts(runtime, "sre.local"))
    # ...unless asked: then sre says it too.
    assert await step("sre, is that right about the deploy?", ["sre.local"]) == [("sre.local", deploy)]
    await runtime.close()


async def test_observers_that_always_answer_cost_one_model_call_each_per_human_message() -> None:
    client = ScriptedChatCompletionClient(lambda r: "__REPLY__ I have something to add!")
    runtime = AUNRuntime()  # the default budgets
    members = [f"chatty{n}.local" for n in range(5)]
    for aid in members:
        await runtime.register_agent(aid, lambda: ObserverAgent(client))
    await runtime.create_group("loud", [*members, "app.local"])
    human = await runtime.open_inbox()
    await runtime.start()
    await human.group_send("loud", "hello")
    await runtime.settle()
    # Nobody was addressed: each observer answers the human once. Each then sees four answers it
    # could not answer (its unaddressed reply is spent), so it asks its model nothing about them.
    assert len(client.requests) == 5
    assert runtime.stats.sent == 1 + 5
    assert runtime.stats.loop_stops == 0 and runtime.stats.budget_stops == 0
    assert any("not answering" in t for t in thoughts(runtime, "chatty0.local"))
    await runtime.close()


async def test_an_observer_echo_storm_is_stopped_by_the_loop_guard() -> None:
    client = ScriptedChatCompletionClient(lambda r: "__REPLY__ I have something to add!")
    runtime = AUNRuntime(max_hops=6, budgets=Budgets.unlimited())  # the depth guard alone
    for aid in ("chatty.local", "chattier.local"):
        await runtime.register_agent(aid, lambda: ObserverAgent(client))
    await runtime.create_group("loud", ["chatty.local", "chattier.local", "app.local"])
    human = await runtime.open_inbox()
    await runtime.start()
    await human.group_send("loud", "hello")
    await runtime.settle()
    # Both observers answer the human, so two chains bounce between them; each ends at the hop limit.
    assert runtime.stats.loop_stops == 2
    assert runtime.stats.sent == 1 + 2 * 6
    assert len(client.requests) == 2 * 7  # hops 0..6 each read once per chain, the 7th reply refused
    stops = runtime.archive.records(kinds=[RecordKind.LOOP_STOP])
    assert all("loop guard" in (stop.reason or "") for stop in stops)
    await runtime.close()


async def test_a_model_failure_is_a_dead_letter_not_silence() -> None:
    def broken(request: ModelRequest) -> str:
        raise ConnectionError("model server unreachable")

    runtime, human = await group_with(ScriptedChatCompletionClient(broken))
    await human.group_send("team", "anyone?")  # type: ignore[attr-defined]
    await runtime.settle()
    [dead] = runtime.archive.dead_letters()
    assert "model server unreachable" in (dead.reason or "")
    await runtime.close()


async def test_the_same_conversation_gives_the_same_trace_twice() -> None:
    traces = []
    for _ in range(2):
        client = ScriptedChatCompletionClient(ObserverStandIn(dict(DEMO_OBSERVERS)))
        runtime, human = await group_with(client, ("db.local", "ops.local", "sre.local"))
        for text, mentions in (
            ("db, the orders query is slow. Any idea?", ["db.local"]),
            ("ops, when is the deploy?", ["ops.local"]),
        ):
            await human.group_send("team", text, mentions=mentions)  # type: ignore[attr-defined]
        await runtime.settle()  # both questions in flight at once: observers answer concurrently
        traces.append(runtime.transcript())
        await runtime.close()
    assert traces[0] == traces[1]
    assert "someone just made that point" in traces[0]
