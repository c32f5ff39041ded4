"""What an idle AID keeps, and that keeping little changes nothing anyone can see: its inbox
subscription under the actor core's inbox rule is still listed, equal and removable; its mailbox,
dropped at eviction, reports the same counts; its `agents` row reaches the archive in a batch."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from autogen_core import AgentId, MessageContext, TopicId, TypeSubscription

from aun_runtime import Archive, AUNActorRuntime, AUNAgent, AUNMessage, AUNRuntime, event
from aun_runtime.core._subscription_index import SubscriptionIndex
from aun_runtime.storage._archive import AGENT_BATCH_SIZE
from aun_runtime.testing import Recorder

PREFIX = "aun.inbox."


def _inbox(aid: str) -> TypeSubscription:
    return TypeSubscription(PREFIX + aid, aid, id=PREFIX + aid)


def test_an_inbox_subscription_under_the_rule_is_listed_equal_routed_and_removable() -> None:
    index = SubscriptionIndex(PREFIX)
    index.add(_inbox("a.local"))
    index.add(_inbox("b.local"))
    assert len(index) == 2
    assert index.subscriptions == [_inbox("a.local"), _inbox("b.local")]  # equal, in registration order
    assert index.recipients(TopicId(PREFIX + "a.local", "default")) == (AgentId("a.local", "default"),)
    assert index.recipients(TopicId(PREFIX + "a.local", "s1")) == (AgentId("a.local", "s1"),)  # as TypeSubscription maps
    assert index.recipients(TopicId(PREFIX + "c.local", "default")) == ()

    # autogen-core's errors: an equal subscription (same id, or same two types) is refused.
    with pytest.raises(ValueError, match="already exists"):
        index.add(_inbox("a.local"))
    with pytest.raises(ValueError, match="already exists"):
        index.add(TypeSubscription(PREFIX + "a.local", "a.local"))

    index.remove(PREFIX + "a.local")
    assert index.subscriptions == [_inbox("b.local")]
    assert index.recipients(TopicId(PREFIX + "a.local", "default")) == ()
    with pytest.raises(ValueError, match="does not exist"):
        index.remove(PREFIX + "a.local")
    index.add(_inbox("a.local"))  # and back
    assert index.recipients(TopicId(PREFIX + "a.local", "default")) == (AgentId("a.local", "default"),)


def test_other_subscribers_to_an_inbox_topic_keep_their_order() -> None:
    index = SubscriptionIndex(PREFIX)
    index.add(_inbox("a.local"))
    index.add(TypeSubscription(PREFIX + "a.local", "spy.local"))  # after the rule's subscriber
    topic = TopicId(PREFIX + "a.local", "default")
    assert index.recipients(topic) == (AgentId("a.local", "default"), AgentId("spy.local", "default"))

    early = SubscriptionIndex(PREFIX)
    early.add(TypeSubscription(PREFIX + "a.local", "spy.local"))  # before: the inbox one is kept as an object
    early.add(_inbox("a.local"))
    assert early.recipients(topic) == (AgentId("spy.local", "default"), AgentId("a.local", "default"))
    assert len(early) == 2


async def test_the_runtime_lists_and_removes_an_aids_inbox_subscription() -> None:
    core = AUNActorRuntime()
    async with AUNRuntime(core=core) as runtime:
        await runtime.register_agent("rec.local", Recorder)
        assert _inbox("rec.local") in core.subscriptions
        inbox = await runtime.open_inbox()
        await inbox.send("rec.local", "first")
        await runtime.settle()
        await core.remove_subscription(PREFIX + "rec.local")
        assert _inbox("rec.local") not in core.subscriptions
        await inbox.send("rec.local", "unheard")  # nobody subscribed: it reaches no one
        await runtime.settle()
        recorder = await runtime.agent_instance("rec.local", Recorder)
        assert [m.text for m in recorder.received] == ["first"]


class Gate(AUNAgent):
    """Holds each message until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__("holds messages")
        self.gate = asyncio.Event()

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        await self.gate.wait()


async def test_a_mailbox_dropped_at_eviction_reports_its_counts_and_is_made_again_from_them() -> None:
    core = AUNActorRuntime(mailbox_capacity=1, block_timeout=0.01)
    async with AUNRuntime(core=core) as runtime:
        await runtime.register_agent("gate.local", Gate)
        await runtime.create_group("room.local", ["gate.local", "app.local"])
        await runtime.group_send("room.local", "one")  # taken by the handler, which waits
        await runtime.group_send("room.local", "two")  # meets the full mailbox: queued over the bound
        gate = await runtime.agent_instance("gate.local", Gate)
        gate.gate.set()
        await runtime.settle()
        held = runtime.mailbox("gate.local")
        assert (held.high_water, held.overflowed) == (2, 1)

        assert await core.evict_idle() == 1
        assert core.mailbox(AgentId("gate.local", "default")) is None  # the core let go of it
        again = runtime.mailbox("gate.local")
        assert again is not held
        assert (again.high_water, again.overflowed, again.occupancy) == (2, 1, 0)
        assert (again.capacity, again.block_timeout) == (1, 0.01)  # made with the runtime's options


async def test_agents_rows_are_committed_in_batches_and_a_reader_sees_them(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite"
    runtime = AUNRuntime(archive=path)
    reader = Archive(path, read_only=True)
    for n in range(AGENT_BATCH_SIZE + 1):
        await runtime.register_agent(f"a{n}.local", Recorder)
    # A full batch is committed at once; the one after it waits for the next write.
    assert len(reader.agents()) == AGENT_BATCH_SIZE
    assert len(runtime.archive.agents()) == AGENT_BATCH_SIZE + 1  # this process's own read writes the rest
    assert len(reader.agents()) == AGENT_BATCH_SIZE + 1
    await runtime.register_agent("late.local", Recorder)
    await runtime.close()  # closing writes what waits
    assert "late.local" in {entry.aid for entry in reader.agents()}
    reader.close()
