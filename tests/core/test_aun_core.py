"""Both in-process cores are AUNCores, and the actor core's mailbox options live in one MailboxOptions."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from autogen_core import (
    AgentId,
    DefaultTopicId,
    MessageContext,
    RoutedAgent,
    SingleThreadedAgentRuntime,
    default_subscription,
    event,
)

from aun_runtime import (
    AUNActorRuntime,
    AUNCore,
    AUNRuntime,
    AUNSingleThreadedRuntime,
    MailboxOptions,
    OverflowPolicy,
)
from aun_runtime.delivery._mailbox import DEFAULT_BLOCK_TIMEOUT, DEFAULT_MAILBOX_CAPACITY
from aun_runtime.testing import Recorder

SINK = AgentId("sink", "default")


@dataclass
class Ping:
    n: int


@default_subscription
class Sink(RoutedAgent):
    def __init__(self) -> None:
        super().__init__("counts pings")
        self.pings: list[int] = []
        self.closed = 0

    @event
    async def on_ping(self, message: Ping, ctx: MessageContext) -> None:
        self.pings.append(message.n)

    async def close(self) -> None:
        self.closed += 1


def test_both_in_process_cores_are_aun_cores() -> None:
    actor: AUNCore = AUNActorRuntime()
    single: AUNCore = AUNSingleThreadedRuntime()
    assert isinstance(actor, AUNCore) and isinstance(single, AUNCore)
    assert actor.drains_mailboxes and not single.drains_mailboxes
    assert actor.archive is None and actor.directory is None
    assert single.archive is None and single.directory is None and single.mailbox_options is None


def test_the_actor_core_has_mailbox_options_only_when_given_some() -> None:
    assert AUNActorRuntime().mailbox_options is None
    assert AUNActorRuntime(mailbox_capacity=5).mailbox_options == MailboxOptions(capacity=5)
    assert AUNActorRuntime(overflow="dead_letter").mailbox_options == MailboxOptions(
        overflow=OverflowPolicy.DEAD_LETTER
    )
    assert AUNActorRuntime(block_timeout=0.5, mailbox_capacity=2).mailbox_options == MailboxOptions(
        capacity=2, block_timeout=0.5
    )


def test_the_actor_core_reports_the_options_of_the_mailboxes_it_makes() -> None:
    default = AUNActorRuntime()
    assert (default.mailbox_capacity, default.overflow, default.block_timeout) == (
        DEFAULT_MAILBOX_CAPACITY,
        OverflowPolicy.BLOCK,
        DEFAULT_BLOCK_TIMEOUT,
    )
    given = AUNActorRuntime(mailbox_capacity=7, overflow="dead_letter")
    assert (given.mailbox_capacity, given.overflow, given.block_timeout) == (
        7,
        OverflowPolicy.DEAD_LETTER,
        DEFAULT_BLOCK_TIMEOUT,
    )


@pytest.mark.parametrize("options", [{"mailbox_capacity": 0}, {"block_timeout": -1.0}, {"overflow": "drop"}])
def test_the_actor_core_refuses_bad_mailbox_options_at_once(options: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        AUNActorRuntime(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize(("options", "capacity"), [({}, DEFAULT_MAILBOX_CAPACITY), ({"mailbox_capacity": 3}, 3)])
async def test_mailboxes_the_actor_core_makes_itself_follow_its_options(
    options: dict[str, int], capacity: int
) -> None:
    runtime = AUNActorRuntime(**options)  # type: ignore[arg-type]
    await Sink.register(runtime, "sink", Sink)
    await runtime.publish_message(Ping(1), DefaultTopicId())  # queued: not started yet
    mailbox = runtime.mailbox(SINK)
    assert mailbox is not None and mailbox.capacity == capacity and mailbox.overflow is OverflowPolicy.BLOCK
    runtime.start()
    await runtime.stop_when_idle()
    assert (await runtime.try_get_underlying_agent_instance(SINK, Sink)).pings == [1]
    await runtime.close()


async def test_closing_the_single_threaded_core_stops_it_and_closes_each_instance_once() -> None:
    runtime = AUNSingleThreadedRuntime()
    await Sink.register(runtime, "sink", Sink)
    runtime.start()
    await runtime.publish_message(Ping(1), DefaultTopicId())
    await runtime.idle()
    sink = await runtime.try_get_underlying_agent_instance(SINK, Sink)

    await runtime.close()  # while running: it stops first
    await runtime.close()  # nothing left to stop or close

    assert sink.pings == [1] and sink.closed == 1
    with pytest.raises(RuntimeError):
        await runtime.stop()  # already stopped by close()


async def test_closing_a_single_threaded_core_that_never_ran_closes_what_it_made() -> None:
    runtime = AUNSingleThreadedRuntime()
    await Sink.register(runtime, "sink", Sink)
    sink = await runtime.try_get_underlying_agent_instance(SINK, Sink)
    await runtime.close()
    await runtime.close()
    assert sink.closed == 1


async def test_the_facade_takes_the_mailbox_options_given_to_its_core() -> None:
    # Given to the core, they were once silently ignored for the AIDs the facade registers.
    async with AUNRuntime(core=AUNActorRuntime(mailbox_capacity=5, overflow="dead_letter")) as runtime:
        await runtime.register_agent("rec.local", Recorder)
        mailbox = runtime.mailbox("rec.local")
        assert (mailbox.capacity, mailbox.overflow) == (5, OverflowPolicy.DEAD_LETTER)
        assert runtime.mailbox_options == MailboxOptions(capacity=5, overflow=OverflowPolicy.DEAD_LETTER)


async def test_mailbox_options_given_to_the_facade_apply_and_the_defaults_stay_the_defaults() -> None:
    async with AUNRuntime(mailbox_capacity=7) as runtime:
        await runtime.register_agent("rec.local", Recorder)
        assert runtime.mailbox("rec.local").capacity == 7
    assert AUNRuntime().mailbox_options == MailboxOptions()


def test_mailbox_options_given_to_both_the_facade_and_its_core_are_refused() -> None:
    with pytest.raises(ValueError, match="both to the core and to the runtime"):
        AUNRuntime(core=AUNActorRuntime(block_timeout=1.0), mailbox_capacity=8)


def test_a_plain_autogen_core_runtime_is_refused_with_the_cores_that_fit() -> None:
    with pytest.raises(TypeError, match=r"not an AUNCore.*AUNSingleThreadedRuntime"):
        AUNRuntime(core=SingleThreadedAgentRuntime())  # type: ignore[arg-type]
