"""A worker's idle waits for the plain autogen-ext publishes its own agents subscribe to, and for no
longer than RETURN_TIMEOUT for one that never comes back."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from autogen_core import AgentId, MessageContext, RoutedAgent, TopicId, TypeSubscription, event

from aun_runtime.distributed import AUNHost, WorkerRuntime
from aun_runtime.distributed._returning import RETURN_TIMEOUT, ReturningPublishes


@dataclass
class Ping:
    n: int


class Slow(RoutedAgent):
    """Takes its time, so that an idle that does not wait would be seen returning early."""

    def __init__(self) -> None:
        super().__init__("slow")
        self.seen: list[int] = []

    @event
    async def on_ping(self, message: Ping, ctx: MessageContext) -> None:
        await asyncio.sleep(0.2)
        self.seen.append(message.n)


async def test_idle_waits_until_a_plain_publish_to_this_workers_agents_is_handled() -> None:
    host = AUNHost("127.0.0.1:0")
    await host.open()
    worker = WorkerRuntime(host.address)
    try:
        await Slow.register(worker, "slow", Slow)
        await worker.add_subscription(TypeSubscription("pings", "slow"))
        await worker.start()
        await worker.publish_message(Ping(1), TopicId("pings", "default"))
        await worker.publish_message(Ping(2), TopicId("pings", "default"))
        await asyncio.wait_for(worker.idle(), 20)
        slow = await worker.try_get_underlying_agent_instance(AgentId("slow", "default"), Slow)
        assert sorted(slow.seen) == [1, 2]
    finally:
        await worker.close()
        await host.stop()


def test_a_publish_that_never_comes_back_is_given_up_on_after_the_timeout(caplog: pytest.LogCaptureFixture) -> None:
    returning = ReturningPublishes()
    returning.sent("a", now=100.0)
    returning.sent("b", now=100.0 + RETURN_TIMEOUT)
    returning.sent("b", now=100.0 + RETURN_TIMEOUT)  # the same id twice: two copies to wait for
    returning.returned("b")
    assert returning.expire(now=100.0 + RETURN_TIMEOUT) == 0
    assert returning.expire(now=100.0 + RETURN_TIMEOUT + 0.1) == 1  # "a" only
    assert "did not come back from the host" in caplog.text
    assert returning  # one copy of "b" still on its way
    returning.returned("b")
    assert not returning
    returning.sent("c", now=0.0)
    assert returning.lost() == 1 and not returning
