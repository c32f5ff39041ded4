"""Routing on AUNActorRuntime is autogen-core's: the same plain RoutedAgents, subscriptions and topics
deliver the same messages to the same agent instances as on SingleThreadedAgentRuntime."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
from autogen_core import (
    AgentId,
    AgentRuntime,
    DefaultTopicId,
    MessageContext,
    RoutedAgent,
    SingleThreadedAgentRuntime,
    TopicId,
    TypePrefixSubscription,
    TypeSubscription,
    default_subscription,
    event,
    type_subscription,
)

from aun_runtime import AUNActorRuntime

Delivery = tuple[str, str, int, str, str]  # (agent type, agent key, n, topic type, topic source)


@dataclass
class Note:
    n: int


@dataclass
class Ping:
    n: int


class Recorder(RoutedAgent):
    """Records every Note it is given."""

    log: list[Delivery]

    def __init__(self) -> None:
        super().__init__("records")

    @event
    async def on_note(self, message: Note, ctx: MessageContext) -> None:
        await asyncio.sleep(0)
        assert ctx.topic_id is not None
        self.log.append((self.id.type, self.id.key, message.n, ctx.topic_id.type, ctx.topic_id.source))


@default_subscription
class DefaultRecorder(Recorder):
    pass


@default_subscription
class Responder(Recorder):
    """Answers a Ping by publishing a Note on the default topic."""

    @event
    async def on_ping(self, message: Ping, ctx: MessageContext) -> None:
        # DefaultTopicId inside a handler takes the handling agent's key as its source.
        await self.publish_message(Note(message.n + 1000), DefaultTopicId())


@type_subscription("news")
class NewsRecorder(Recorder):
    pass


Scenario = Callable[[AgentRuntime, list[Delivery]], Awaitable[None]]


def _bind(cls: type[Recorder], log: list[Delivery]) -> Callable[[], Recorder]:
    def make() -> Recorder:
        agent = cls()
        agent.log = log
        return agent

    return make


async def _run(runtime_class: type[AgentRuntime], scenario: Scenario) -> list[Delivery]:
    runtime = runtime_class()
    log: list[Delivery] = []
    await scenario(runtime, log)
    return log


async def _same_on_both(scenario: Scenario) -> list[Delivery]:
    expected = await _run(SingleThreadedAgentRuntime, scenario)
    actual = await _run(AUNActorRuntime, scenario)
    assert sorted(actual) == sorted(expected)
    for agent in {(d[0], d[1]) for d in expected}:  # each agent sees its messages in the same order
        assert [d for d in actual if d[:2] == agent] == [d for d in expected if d[:2] == agent]
    return actual


async def test_type_subscriptions_map_the_topic_source_to_the_agent_key() -> None:
    async def scenario(runtime: AgentRuntime, log: list[Delivery]) -> None:
        await runtime.register_factory("rec", _bind(Recorder, log))
        await runtime.add_subscription(TypeSubscription("orders", "rec"))
        runtime.start()  # type: ignore[attr-defined]
        for n, source in enumerate(["eu", "us", "eu", "default", "us"]):
            await runtime.publish_message(Note(n), TopicId("orders", source))
        await runtime.publish_message(Note(99), TopicId("other", "eu"))  # nobody subscribed: dropped
        await runtime.stop_when_idle()  # type: ignore[attr-defined]

    log = await _same_on_both(scenario)
    assert {(key, n) for _, key, n, _, _ in log} == {("eu", 0), ("us", 1), ("eu", 2), ("default", 3), ("us", 4)}


async def test_prefix_subscriptions_and_the_direct_prefix_register_adds() -> None:
    async def scenario(runtime: AgentRuntime, log: list[Delivery]) -> None:
        await Recorder.register(runtime, "rec", _bind(Recorder, log))  # adds TypePrefixSubscription("rec:")
        await runtime.add_subscription(TypePrefixSubscription("alerts.", "rec"))
        runtime.start()  # type: ignore[attr-defined]
        await runtime.publish_message(Note(1), TopicId("alerts.disk", "host1"))
        await runtime.publish_message(Note(2), TopicId("alerts.cpu", "host2"))
        await runtime.publish_message(Note(3), TopicId("alertsX", "host1"))  # no dot: no match
        await runtime.publish_message(Note(4), TopicId("rec:", "direct"))
        await runtime.stop_when_idle()  # type: ignore[attr-defined]

    log = await _same_on_both(scenario)
    assert sorted(d[2] for d in log) == [1, 2, 4]


async def test_default_topic_and_class_subscriptions_from_decorators() -> None:
    async def scenario(runtime: AgentRuntime, log: list[Delivery]) -> None:
        await DefaultRecorder.register(runtime, "dflt", _bind(DefaultRecorder, log))
        await NewsRecorder.register(runtime, "news", _bind(NewsRecorder, log))
        await Responder.register(runtime, "responder", _bind(Responder, log))
        runtime.start()  # type: ignore[attr-defined]
        await runtime.publish_message(Note(1), DefaultTopicId())  # outside a handler: source "default"
        await runtime.publish_message(Note(2), DefaultTopicId(type="news"))
        await runtime.publish_message(Ping(3), DefaultTopicId(source="k7"))  # reply goes to source k7
        await runtime.stop_when_idle()  # type: ignore[attr-defined]

    log = await _same_on_both(scenario)
    assert ("dflt", "default", 1, "default", "default") in log
    assert ("news", "default", 2, "news", "default") in log
    assert ("dflt", "k7", 1003, "default", "k7") in log  # the responder never hears its own publish
    assert not [d for d in log if d[0] == "responder" and d[2] == 1003]


async def test_a_publish_skips_its_sender_and_duplicate_subscriptions_deliver_twice() -> None:
    async def scenario(runtime: AgentRuntime, log: list[Delivery]) -> None:
        await runtime.register_factory("a", _bind(Recorder, log))
        await runtime.register_factory("b", _bind(Recorder, log))
        await runtime.add_subscription(TypeSubscription("room", "a"))
        await runtime.add_subscription(TypeSubscription("room", "b"))
        await runtime.add_subscription(TypePrefixSubscription("ro", "b"))  # b matches "room" twice
        runtime.start()  # type: ignore[attr-defined]
        await runtime.publish_message(Note(1), TopicId("room", "default"), sender=AgentId("a", "default"))
        await runtime.stop_when_idle()  # type: ignore[attr-defined]

    log = await _same_on_both(scenario)
    assert [d[0] for d in log] == ["b", "b"]


async def test_subscriptions_change_at_run_time_with_autogen_errors() -> None:
    for runtime_class in (SingleThreadedAgentRuntime, AUNActorRuntime):
        runtime: AgentRuntime = runtime_class()
        log: list[Delivery] = []
        await runtime.register_factory("rec", _bind(Recorder, log))
        subscription = TypeSubscription("t", "rec")
        await runtime.add_subscription(subscription)
        with pytest.raises(ValueError, match="already exists"):
            await runtime.add_subscription(TypeSubscription("t", "rec"))  # equal by types
        # Another class with the same id is not "equal" to autogen-core: both are kept, and removing
        # the id removes both.
        await runtime.add_subscription(TypePrefixSubscription("t", "rec", id=subscription.id))
        runtime.start()  # type: ignore[attr-defined]
        await runtime.publish_message(Note(1), TopicId("t", "default"))
        await runtime.stop_when_idle()  # type: ignore[attr-defined]
        await runtime.remove_subscription(subscription.id)
        with pytest.raises(ValueError, match="does not exist"):
            await runtime.remove_subscription(subscription.id)
        runtime.start()  # type: ignore[attr-defined]
        await runtime.publish_message(Note(2), TopicId("t", "default"))
        await runtime.stop_when_idle()  # type: ignore[attr-defined]
        assert [d[2] for d in log] == [1, 1], runtime_class.__name__  # matched by both while they lasted


async def test_many_subscriptions_route_in_constant_time_per_topic() -> None:
    # 20,000 AIDs with an inbox subscription each: autogen-core's manager is quadratic in this.
    runtime = AUNActorRuntime()
    log: list[Delivery] = []
    await runtime.register_factory("rec", _bind(Recorder, log))
    for n in range(20_000):
        await runtime.add_subscription(TypeSubscription(f"inbox.{n}", "rec"))
    runtime.start()
    await runtime.publish_message(Note(7), TopicId("inbox.12345", "k"))
    await runtime.stop_when_idle()
    assert log == [("rec", "k", 7, "inbox.12345", "k")]
    assert len(runtime.subscriptions) == 20_000
