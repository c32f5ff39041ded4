"""Handler failures and undeliverable messages become dead letters: archived, logged, counted."""

from __future__ import annotations

import logging

import pytest

from aun_runtime import NoRouteError, NotAGroupMemberError, RecordKind, UnknownAIDError, UnknownGroupError
from aun_runtime.testing import Raiser, Recorder

from .conftest import RuntimeFactory


async def test_a_handler_that_raises_leaves_a_dead_letter_and_the_agent_goes_on(
    make_runtime: RuntimeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("fragile.local", Raiser)
    await runtime.open_inbox()
    await runtime.start()

    with caplog.at_level(logging.ERROR, logger="aun_runtime"):
        await runtime.send("fragile.local", "fine")
        bad = await runtime.send("fragile.local", "boom now")
        await runtime.send("fragile.local", "fine again")
        await runtime.settle()

    fragile = await runtime.agent_instance("fragile.local", Raiser)
    assert fragile.handled == ["fine", "fine again"]
    [dead] = runtime.archive.dead_letters()
    assert dead.owner == "fragile.local"
    assert dead.message == bad
    assert "RuntimeError: boom: handler failed on purpose" in (dead.reason or "")
    assert any(r.levelno == logging.ERROR and "fragile.local" in r.getMessage() for r in caplog.records)
    # the failed message was still received and archived: it was not lost, its handling failed
    assert runtime.archive.count(owner="fragile.local", kind=RecordKind.RECEIVED) == 3


async def test_unknown_local_aid_is_an_error_and_a_dead_letter(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.start()

    with pytest.raises(UnknownAIDError, match=r"nobody\.local"):
        await runtime.send("nobody.local", "hello?")

    [dead] = runtime.archive.dead_letters()
    assert dead.message is not None and dead.message.to == "nobody.local"
    assert await runtime.ping("nobody.local") is False


async def test_foreign_domain_without_a_gateway_is_no_route(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.start()

    with pytest.raises(NoRouteError):
        await runtime.send("alice.agentid.pub", "hello out there")
    with pytest.raises(NoRouteError):
        await runtime.ping("alice.agentid.pub")
    assert runtime.stats.dead_letters == 1


async def test_group_errors_unknown_group_and_outsider(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("in.local", Recorder)
    await runtime.create_group("club", ["in.local"])
    await runtime.start()

    with pytest.raises(UnknownGroupError):
        await runtime.group_send("no-such-group", "hi", sender="in.local")
    with pytest.raises(NotAGroupMemberError, match=r"out\.local"):
        await runtime.group_send("club", "let me in", sender="out.local")
    await runtime.settle()

    member = await runtime.agent_instance("in.local", Recorder)
    assert member.received == []
    assert [r.owner for r in runtime.archive.dead_letters()] == ["in.local", "out.local"]


async def test_a_group_member_with_no_agent_costs_the_others_nothing(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("here.local", Recorder)
    await runtime.create_group("half", ["here.local", "ghost.local", "late.local", "far.agentid.pub"])
    await runtime.start()

    await runtime.group_send("half", "anyone?", sender="here.local")
    await runtime.register_agent("late.local", Recorder)  # joins the living: gets what comes next
    await runtime.group_send("half", "now?", sender="here.local")
    await runtime.settle()

    late = await runtime.agent_instance("late.local", Recorder)
    assert [m.text for m in late.received] == ["now?"]
    dead = runtime.archive.dead_letters()
    assert sorted((r.owner, r.message.text if r.message else None) for r in dead) == [
        ("far.agentid.pub", "anyone?"),
        ("far.agentid.pub", "now?"),
        ("ghost.local", "anyone?"),
        ("ghost.local", "now?"),
        ("late.local", "anyone?"),
    ]
    assert all(("UnknownAIDError" in (r.reason or "")) != (r.owner == "far.agentid.pub") for r in dead)


async def test_an_agent_that_cannot_be_created_leaves_a_dead_letter_and_the_others_get_theirs(
    make_runtime: RuntimeFactory,
) -> None:
    def broken() -> Recorder:
        raise ValueError("this agent cannot be made")

    runtime = await make_runtime()
    await runtime.register_agent("here.local", Recorder)
    await runtime.register_agent("there.local", Recorder)
    await runtime.register_agent("broken.local", broken)
    await runtime.create_group("trio", ["here.local", "there.local", "broken.local"])
    await runtime.start()

    posted = await runtime.group_send("trio", "all here?", sender="here.local")
    await runtime.settle()

    there = await runtime.agent_instance("there.local", Recorder)
    assert [m.text for m in there.received] == ["all here?"]
    [dead] = runtime.archive.dead_letters()
    assert (dead.owner, dead.message) == ("broken.local", posted)
    assert "ValueError: this agent cannot be made" in (dead.reason or "")
