"""Idle eviction: an idle instance is saved and dropped, and its next message meets a new instance
with the same state, in the same order, as if nothing had happened."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from autogen_core import AgentId, MessageContext, RoutedAgent, TopicId, TypeSubscription, event
from autogen_core.model_context import BufferedChatCompletionContext
from autogen_core.models import UserMessage

from aun_runtime import (
    AUNActorRuntime,
    AUNAgent,
    AUNMessage,
    AUNRuntime,
    ConfigurationError,
    MemoryStateStore,
    RecordKind,
)
from aun_runtime.testing import Recorder

COUNTER = AgentId("counter", "default")


@dataclass
class Add:
    n: int


class Counter(RoutedAgent):
    """Keeps every number it was given, in order; its state is that list."""

    made = 0

    def __init__(self) -> None:
        super().__init__("counts")
        Counter.made += 1
        self.seen: list[int] = []
        self.closed = False
        self.saving: asyncio.Event | None = None  # set by a test to hold save_state

    @event
    async def on_add(self, message: Add, ctx: MessageContext) -> None:
        await asyncio.sleep(0)
        self.seen.append(message.n)

    async def save_state(self) -> Mapping[str, Any]:
        if self.saving is not None:
            await self.saving.wait()
        return {"seen": list(self.seen)}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self.seen = list(state["seen"])

    async def close(self) -> None:
        self.closed = True


async def _counter_runtime(**options: Any) -> AUNActorRuntime:
    runtime = AUNActorRuntime(**options)
    await runtime.register_factory("counter", Counter)
    await runtime.add_subscription(TypeSubscription("add", "counter"))
    runtime.start()
    return runtime


async def _add(runtime: AUNActorRuntime, *numbers: int) -> None:
    for n in numbers:
        await runtime.publish_message(Add(n), TopicId("add", "default"))


async def test_an_evicted_agent_comes_back_with_its_state_and_its_order() -> None:
    runtime = await _counter_runtime()
    await _add(runtime, 1, 2, 3)
    await runtime.idle()
    first = await runtime.try_get_underlying_agent_instance(COUNTER, Counter)

    assert await runtime.evict_idle() == 1
    assert first.closed and runtime.instances == 0 and runtime.saved_states == 1

    await _add(runtime, 4, 5, 6)
    await runtime.idle()
    second = await runtime.try_get_underlying_agent_instance(COUNTER, Counter)
    assert second is not first
    assert second.seen == [1, 2, 3, 4, 5, 6]
    assert runtime.saved_states == 0 and runtime.evicted == 1
    await runtime.stop()


async def test_the_idle_timer_evicts_by_itself() -> None:
    runtime = await _counter_runtime(idle_timeout=0.02)
    await _add(runtime, 1)
    await runtime.idle()
    for _ in range(500):  # the timer fires between 1.0 and 1.1 times the timeout
        if runtime.evicted:
            break
        await asyncio.sleep(0.01)
    assert runtime.evicted == 1 and runtime.instances == 0
    await _add(runtime, 2)
    await runtime.idle()
    assert (await runtime.try_get_underlying_agent_instance(COUNTER, Counter)).seen == [1, 2]
    await runtime.stop()


async def test_a_message_that_arrives_while_the_state_is_saved_keeps_the_instance() -> None:
    runtime = await _counter_runtime()
    await _add(runtime, 1)
    await runtime.idle()
    counter = await runtime.try_get_underlying_agent_instance(COUNTER, Counter)
    counter.saving = asyncio.Event()

    eviction = asyncio.create_task(runtime.evict_idle())
    await asyncio.sleep(0)  # eviction is now waiting in save_state
    await _add(runtime, 2)
    counter.saving.set()
    assert await eviction == 0
    await runtime.idle()

    assert await runtime.try_get_underlying_agent_instance(COUNTER, Counter) is counter
    assert counter.seen == [1, 2] and not counter.closed
    await runtime.stop()


async def test_agents_that_may_not_be_evicted_stay() -> None:
    class Pinned(Counter):
        evictable = False

    runtime = AUNActorRuntime()
    await runtime.register_factory("pinned", Pinned)
    solo = Counter()
    await runtime.register_agent_instance(solo, AgentId("solo", "default"))
    runtime.start()
    await runtime.get("pinned", lazy=False)
    assert await runtime.evict_idle() == 0
    assert runtime.instances == 2 and not solo.closed
    await runtime.stop()


async def test_an_agent_without_save_state_is_evicted_without_autogen_warnings() -> None:
    class Stateless(RoutedAgent):
        def __init__(self) -> None:
            super().__init__("no state")

    runtime = AUNActorRuntime()
    await runtime.register_factory("stateless", Stateless)
    runtime.start()
    await runtime.get("stateless", lazy=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # BaseAgent.save_state warns "not implemented"
        assert await runtime.evict_idle() == 1
    assert runtime.saved_states == 0
    await runtime.stop()


async def test_the_runtime_state_covers_evicted_agents_and_loads_lazily() -> None:
    runtime = await _counter_runtime()
    await _add(runtime, 1, 2)
    await runtime.idle()
    await runtime.evict_idle()
    saved = await runtime.save_state()
    assert saved == {"counter/default": {"seen": [1, 2]}}
    assert await runtime.agent_save_state(COUNTER) == {"seen": [1, 2]}
    assert runtime.instances == 0  # reading an evicted agent's state does not bring it back
    await runtime.stop()


# -- through the AUN facade ---------------------------------------------------------------------


class TallyAgent(AUNAgent):
    """Keeps the texts it was sent; its state is that list."""

    def __init__(self) -> None:
        super().__init__("tallies")
        self.texts: list[str] = []

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.texts.append(message.text or "")

    async def save_state(self) -> Mapping[str, Any]:
        return {"texts": list(self.texts)}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self.texts = list(state["texts"])


async def test_facade_eviction_keeps_state_dedup_mailbox_and_history() -> None:
    core = AUNActorRuntime()
    async with AUNRuntime(core=core) as runtime:
        await runtime.register_agent("tally.local", TallyAgent)
        inbox = await runtime.open_inbox()
        await inbox.send("tally.local", "one", message_id="m-1")
        await inbox.send("tally.local", "two", message_id="m-2")
        await runtime.settle()
        mailbox = runtime.mailbox("tally.local")
        high_water = mailbox.high_water

        assert await core.evict_idle() == 1  # the inbox stays: the application holds it
        assert core.instances == 1
        # The idle AID keeps no mailbox, only its counts: the one made when asked starts from them.
        again = runtime.mailbox("tally.local")
        assert again is not mailbox and again.high_water == high_water >= 1 and again.occupancy == 0

        await inbox.send("tally.local", "one again", message_id="m-1")  # a redelivery: still a duplicate
        await inbox.send("tally.local", "three", message_id="m-3")
        await runtime.settle()

        tally = await runtime.agent_instance("tally.local", TallyAgent)
        assert tally.texts == ["one", "two", "three"]
        assert runtime.stats.duplicates == 1
        assert runtime.mailbox("tally.local") is again and again.high_water >= high_water
        received = runtime.archive.history("tally.local", kinds=[RecordKind.RECEIVED])
        assert [r.text for r in received] == ["one", "two", "three"]


async def test_facade_agents_with_scheduled_actions_are_not_evicted() -> None:
    class Heartbeat(AUNAgent):
        async def on_start(self) -> None:
            self.schedule(self.beat, every=60)

        async def beat(self) -> None:
            pass

    core = AUNActorRuntime()
    async with AUNRuntime(core=core) as runtime:
        await runtime.register_agent("beat.local", Heartbeat)
        await runtime.register_agent("rec.local", Recorder)
        await runtime.send("rec.local", "hello")
        await runtime.settle()
        assert await core.evict_idle() == 1  # the recorder, not the agent with a live schedule
        assert core.instances == 2  # and not the app inbox the send without a sender opened
        await runtime.stop()


class Conversation(AUNAgent):
    """Keeps what it is told in an autogen-core model context, which it saves and loads."""

    def __init__(self) -> None:
        super().__init__("converses")
        self.context = BufferedChatCompletionContext(buffer_size=3)

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        await self.context.add_message(UserMessage(content=message.text or "", source=message.from_aid))

    async def save_state(self) -> Mapping[str, Any]:
        return {"context": await self.context.save_state()}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        await self.context.load_state(state["context"])


async def test_an_autogen_model_context_survives_eviction_unchanged() -> None:
    core = AUNActorRuntime()
    async with AUNRuntime(core=core) as runtime:
        await runtime.register_agent("talk.local", Conversation)
        inbox = await runtime.open_inbox()
        for text in ("one", "two"):
            await inbox.send("talk.local", text)
        await runtime.settle()
        assert await core.evict_idle() == 1
        for text in ("three", "four"):
            await inbox.send("talk.local", text)
        await runtime.settle()

        agent = await runtime.agent_instance("talk.local", Conversation)
        messages = await agent.context.get_messages()
        assert [m.content for m in messages] == ["two", "three", "four"]  # the buffer of 3, in order
        assert all(isinstance(m, UserMessage) and m.source == "app.local" for m in messages)


class KeptStore(MemoryStateStore):
    """A store of the user's that says it is durable: the runtime saves into it at close, then closes it."""

    __slots__ = ("closed",)
    durable = True

    def __init__(self) -> None:
        super().__init__()
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


async def test_closing_saves_into_a_store_that_says_it_is_durable_and_closes_it() -> None:
    kept, memory = KeptStore(), MemoryStateStore()
    for store in (kept, memory):
        runtime = await _counter_runtime(state_store=store)
        await _add(runtime, 1, 2)
        await runtime.idle()
        await runtime.close()
        await runtime.close()
    assert kept.peek(COUNTER) == {"seen": [1, 2]} and kept.closed == 1  # saved into, closed once
    assert memory.peek(COUNTER) is None  # the process's own memory: nothing to save for a next one


class OldStore:
    """A store written before stores said what they are: no `durable`, no `close`."""

    def put(self, agent: AgentId, state: Mapping[str, Any]) -> None: ...
    def take(self, agent: AgentId) -> Mapping[str, Any] | None: ...
    def peek(self, agent: AgentId) -> Mapping[str, Any] | None: ...
    def items(self) -> Iterator[tuple[AgentId, Mapping[str, Any]]]:
        return iter(())
    def __len__(self) -> int:
        return 0


def test_a_store_that_does_not_say_what_it_is_is_refused_when_the_core_is_made() -> None:
    with pytest.raises(ConfigurationError, match=r"OldStore is not an AgentStateStore: .*close and durable"):
        AUNActorRuntime(state_store=OldStore())  # type: ignore[arg-type]
