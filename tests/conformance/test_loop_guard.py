"""The loop guard stops both storm shapes and says so; ordinary conversations never meet it."""

from __future__ import annotations

import logging

import pytest

from aun_runtime import Budgets, RecordKind
from aun_runtime.testing import Bouncer, Forwarder, Replier

from .conftest import RuntimeFactory


async def test_a_two_agent_storm_stops_at_the_hop_limit(
    make_runtime: RuntimeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = await make_runtime(max_hops=6)
    await runtime.register_agent("ping.local", Bouncer)
    await runtime.register_agent("pong.local", Bouncer)
    await runtime.start()

    with caplog.at_level(logging.WARNING, logger="aun_runtime"):
        await runtime.send("pong.local", "start", sender="ping.local")
        await runtime.settle()

    ping = await runtime.agent_instance("ping.local", Bouncer)
    pong = await runtime.agent_instance("pong.local", Bouncer)
    assert pong.handled + ping.handled == 7  # hops 0..6 delivered, the 7th send refused
    [stop] = runtime.archive.records(kinds=[RecordKind.LOOP_STOP])
    assert stop.message is not None and stop.message.hops == 7
    assert "loop guard" in (stop.reason or "")
    assert runtime.stats.loop_stops == 1
    assert any("loop guard" in r.getMessage() for r in caplog.records)


async def test_a_three_agent_cycle_stops_too(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(max_hops=9)
    await runtime.register_agent("a.local", lambda: Forwarder("b.local"))
    await runtime.register_agent("b.local", lambda: Forwarder("c.local"))
    await runtime.register_agent("c.local", lambda: Forwarder("a.local"))
    await runtime.start()

    first = await runtime.send("a.local", "round and round")
    await runtime.settle()

    handled = [
        (await runtime.agent_instance(aid, Forwarder)).handled for aid in ("a.local", "b.local", "c.local")
    ]
    assert sum(handled) == 10
    [stop] = runtime.archive.records(kinds=[RecordKind.LOOP_STOP])
    assert stop.message is not None and stop.message.thread == first.message_id


async def test_a_group_echo_storm_stops(make_runtime: RuntimeFactory) -> None:
    # Budgets off: the default unaddressed-replies budget would stop this storm first (test_budgets.py).
    runtime = await make_runtime(max_hops=5, budgets=Budgets.unlimited())
    for aid in ("x.local", "y.local"):
        await runtime.register_agent(aid, Bouncer)
    await runtime.create_group("echo-chamber", ["x.local", "y.local"])
    await runtime.start()

    await runtime.group_send("echo-chamber", "hello", sender="x.local")
    await runtime.settle()

    assert runtime.stats.loop_stops == 1
    assert runtime.archive.count(kind=RecordKind.LOOP_STOP) == 1


async def test_separate_conversations_each_get_their_own_budget(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(max_hops=2)
    await runtime.register_agent("helper.local", lambda: Replier(times=1))
    inbox = await runtime.open_inbox()
    await runtime.start()

    for n in range(10):
        await inbox.send("helper.local", f"question {n}")
    await runtime.settle()

    assert len(inbox.received) == 10
    assert runtime.stats.loop_stops == 0
