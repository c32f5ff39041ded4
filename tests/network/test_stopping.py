"""Stopping a gateway agent ends within its bound, even when a link's task swallowed its cancel."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aun_runtime import AUNAgent, AUNRuntime
from aun_runtime.gateway import GatewayServer
from aun_runtime.network import GatewayAgent, LinkState
from aun_runtime.network._link import STOP_TIMEOUT, SUPERVISE_POLL

from .conftest import info_of, unique

Bridged = Callable[..., Awaitable[tuple[AUNRuntime, GatewayAgent]]]


class Quiet(AUNAgent):
    """Says nothing."""


async def test_stop_ends_when_a_state_change_comes_with_the_cancel(gateway: GatewayServer, bridged: Bridged) -> None:
    # Python 3.11's asyncio.wait_for returns the result, and drops the cancel, when what it waits
    # for completes in the same turn as the cancel arrives: a state change of the client (the link's
    # supervisor waits for one) at the moment the gateway agent stops. Under load, with 1,000 links,
    # some hit it and their supervisor went on forever, and so did `stop`. Setting the event just
    # before stopping makes the two coincide every time.
    aid = f"{unique('stopping')}.{gateway.issuer}"

    async def register(runtime: AUNRuntime) -> None:
        await runtime.register_agent(aid, Quiet)

    _, agent = await bridged(info_of(gateway), "stopping", register)
    await asyncio.sleep(2.5 * SUPERVISE_POLL)  # the supervisor waits for a state change (mid-poll)
    link = agent._links[aid]  # its private parts: the race is in there, and only a test may make it certain
    link._state_changed.set()
    await asyncio.wait_for(agent.stop(), STOP_TIMEOUT + 5)
    assert agent.states() == {}
    assert link.state is LinkState.STOPPED
