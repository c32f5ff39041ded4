"""A group member of the local domain that nobody registered is named in one warning."""

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
        if r.name == "aun_runtime" and r.levelno == logging.WARNING and "is not registered" in r.getMessage()
    ]


async def test_an_unregistered_local_member_is_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    runtime = AUNRuntime()
    await runtime.register_agent("quiet.local", Quiet)
    with caplog.at_level(logging.WARNING, logger="aun_runtime"):
        await runtime.create_group("lobby", ["quiet.local", "ghost.local", "far.example"])
        await runtime.create_group("hall", ["ghost.local"])
        await runtime.add_member("hall", "ghost.local")
    warnings = _absent_warnings(caplog)
    assert len(warnings) == 1
    assert "group lobby: member ghost.local is not registered" in warnings[0]
    assert "dead letters until an agent with that AID is registered" in warnings[0]
    assert "register_agent('ghost.local', ...)" in warnings[0]
    await runtime.close()


async def test_members_reached_elsewhere_are_not_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    runtime = AUNRuntime()

    class Route:  # stands in for a gateway agent: with a route, copies go out instead
        async def ping(self, aid: str) -> bool:
            return True

    runtime.set_outbound_route(Route())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="aun_runtime"):
        await runtime.create_group("lobby", ["ghost.local"])
    assert _absent_warnings(caplog) == []
    await runtime.close()
