"""Budgets bound a thread's breadth, where the hop guard bounds only its depth."""

from __future__ import annotations

import logging

import pytest

from aun_runtime import AUNAgent, AUNMessage, Budgets, MessageContext, RecordKind, event
from aun_runtime.testing import Bouncer, Replier

from .conftest import RuntimeFactory


class Spreader(AUNAgent):
    """Answers every direct message by writing to each of its peers: a tree that grows sideways."""

    def __init__(self, peers: list[str]) -> None:
        super().__init__("writes to every peer about everything")
        self.peers = peers

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        for peer in self.peers:
            await self.send(peer, "did you hear?")


async def test_a_broadcast_group_that_answers_everything_stops_after_one_round(
    make_runtime: RuntimeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = await make_runtime()
    members = [f"m{n}.local" for n in range(5)]
    for aid in members:
        await runtime.register_agent(aid, Bouncer)
    inbox = await runtime.open_inbox("alice.local")
    await runtime.create_group("room", [*members, "alice.local"])
    await runtime.start()

    with caplog.at_level(logging.WARNING, logger="aun_runtime"):
        await inbox.group_send("room", "anyone?")
        await runtime.settle()

    # Nobody was addressed: each member answers once, and its second answer (to another member's
    # answer) is refused, recorded, counted and logged.
    sent = runtime.archive.records(kinds=[RecordKind.SENT])
    assert len(sent) == 1 + 5
    stops = runtime.archive.records(kinds=[RecordKind.BUDGET_STOP])
    assert len(stops) == runtime.stats.budget_stops == 5 * 4
    assert all("unaddressed_replies=1" in (stop.reason or "") for stop in stops)
    assert runtime.stats.loop_stops == 0 and runtime.stats.dead_letters == 0
    assert any("budget stop" in r.getMessage() for r in caplog.records)


async def test_an_addressed_agent_may_answer_more_than_once(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("helper.local", lambda: Replier(times=3))
    inbox = await runtime.open_inbox()
    await runtime.start()

    await inbox.send("helper.local", "tell me three things")
    await runtime.settle()

    assert len(inbox.received) == 3
    assert runtime.stats.budget_stops == 0


async def test_a_thread_that_grows_sideways_stops_at_its_budget(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(budgets=Budgets(thread_messages=20))
    names = ["a.local", "b.local", "c.local"]
    for aid in names:
        await runtime.register_agent(aid, lambda me=aid: Spreader([n for n in names if n != me]))
    await runtime.start()

    first = await runtime.send("a.local", "rumour")
    await runtime.settle()

    # Every message was addressed (direct), so only the thread budget holds it: 20 messages, the
    # first one included, and the hop guard (32) never came near.
    in_thread = [
        r
        for r in runtime.archive.records(kinds=[RecordKind.SENT])
        if r.message and r.message.thread == first.message_id
    ]
    assert len(in_thread) == 20
    assert runtime.stats.budget_stops >= 1 and runtime.stats.loop_stops == 0
    [reason] = {stop.reason for stop in runtime.archive.records(kinds=[RecordKind.BUDGET_STOP])}
    assert reason is not None and "thread_messages=20" in reason


async def test_an_agent_of_its_own_budgets_is_held_to_them(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("chatty.local", Bouncer, budgets=Budgets(unaddressed_replies=3))
    await runtime.register_agent("calm.local", Bouncer, budgets=Budgets(unaddressed_replies=100))
    await runtime.create_group("room", ["chatty.local", "calm.local"])
    await runtime.start()

    await runtime.group_send("room", "hello", sender="calm.local")
    await runtime.settle()

    said = [r.message.from_aid for r in runtime.archive.records(kinds=[RecordKind.SENT]) if r.message]
    # calm's first message, then the two alternate until chatty has used its own allowance.
    assert said.count("chatty.local") == 3
    assert said.count("calm.local") == 1 + 3
    [stop] = runtime.archive.records(kinds=[RecordKind.BUDGET_STOP])
    assert stop.owner == "chatty.local" and "unaddressed_replies=3" in (stop.reason or "")
