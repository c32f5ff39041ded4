"""A group member of the local domain that nobody registered is named in one warning, at the first
post whose copy for it becomes a dead letter (registering it after the group is legitimate)."""

from __future__ import annotations

import logging

import pytest

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, event


class Quiet(AUNAgent):
    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None: ...


def _absent_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records
        if r.name == "aun_runtime" and r.levelno == logging.WARNING and "is not registered:" in r.getMessage()
    ]


async def test_an_unregistered_local_member_is_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    runtime = AUNRuntime()
    await runtime.start()
    app = await runtime.open_inbox("app.local")
    with caplog.at_level(logging.WARNING, logger="aun_runtime"):
        await runtime.create_group("lobby", ["app.local", "ghost.local", "far.example"])
        await runtime.create_group("hall", ["app.local", "ghost.local"])
        await app.group_send("lobby", "one")
        await app.group_send("lobby", "two")
        await app.group_send("hall", "three")
        await runtime.settle()
    warnings = _absent_warnings(caplog)
    assert len(warnings) == 1
    assert "group lobby: member ghost.local is not registered" in warnings[0]
    assert "dead letters until an agent with that AID is registered" in warnings[0]
    assert "register_agent('ghost.local', ...)" in warnings[0]
    assert runtime.stats.dead_letters >= 3  # every copy is still recorded as a dead letter
    await runtime.close()


async def test_a_member_registered_after_the_group_before_any_post_is_not_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = AUNRuntime()
    await runtime.start()
    app = await runtime.open_inbox("app.local")
    with caplog.at_level(logging.WARNING, logger="aun_runtime"):
        await runtime.create_group("lobby", ["app.local", "late.local"])
        await runtime.register_agent("late.local", Quiet)
        await app.group_send("lobby", "hello")
        await runtime.settle()
    assert _absent_warnings(caplog) == []
    await runtime.close()


async def test_members_reached_through_a_gateway_route_are_not_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = AUNRuntime()
    await runtime.start()
    app = await runtime.open_inbox("app.local")
    sent_out: list[str] = []

    class Route:  # stands in for a gateway agent: with a route, copies go out instead
        async def forward(self, message: AUNMessage, recipient: str | None) -> None:
            sent_out.append(str(recipient))

        async def ping(self, aid: str) -> bool:
            return True

    runtime.set_outbound_route(Route())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="aun_runtime"):
        await runtime.create_group("lobby", ["app.local", "ghost.local"])
        await app.group_send("lobby", "hello")
        await runtime.settle()
    assert _absent_warnings(caplog) == []
    assert sent_out == ["ghost.local"]
    await runtime.close()
