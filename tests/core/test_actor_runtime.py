"""AUNActorRuntime with plain autogen-core agents: actor delivery, backpressure, failures, stop, state."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from autogen_core import AgentId, MessageContext, RoutedAgent, TopicId, TypeSubscription, event

from aun_runtime import AUNActorRuntime, MailboxFullError, RPCForbiddenError, RuntimeStoppedError
from aun_runtime.base._errors import UndeliverableError
from aun_runtime.core._actor_drain import DRAIN_BATCH

TOPIC = TopicId("work", "default")


@dataclass
class Job:
    n: int


class Worker(RoutedAgent):
    """Takes jobs; awaits between steps so overlapping handlers would show; fails on ``fail_on``."""

    def __init__(self, fail_on: int | None = None, gate: asyncio.Event | None = None) -> None:
        super().__init__("works")
        self.done: list[int] = []
        self.running = 0
        self.max_running = 0
        self.fail_on = fail_on
        self.gate = gate
        self.cancelled = False
        self.started = asyncio.Event()

    @event
    async def on_job(self, message: Job, ctx: MessageContext) -> None:
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        self.started.set()
        try:
            if self.gate is not None:
                try:
                    await self.gate.wait()
                except asyncio.CancelledError:
                    self.cancelled = ctx.cancellation_token.is_cancelled()
                    raise
            await asyncio.sleep(0)
            if message.n == self.fail_on:
                raise RuntimeError(f"job {message.n} failed on purpose")
            self.done.append(message.n)
        finally:
            self.running -= 1

    async def save_state(self) -> Mapping[str, Any]:
        return {"done": list(self.done)}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self.done = list(state["done"])


Failure = tuple[AgentId, Any, BaseException]


async def _runtime(make: Any = lambda: Worker(), **options: Any) -> tuple[AUNActorRuntime, list[Failure]]:
    runtime = AUNActorRuntime(**options)
    failures: list[Failure] = []
    runtime.attach(on_undeliverable=lambda agent, message, error: failures.append((agent, message, error)))
    await runtime.register_factory("worker", make)
    await runtime.add_subscription(TypeSubscription("work", "worker"))
    return runtime, failures


async def _worker(runtime: AUNActorRuntime) -> Worker:
    return await runtime.try_get_underlying_agent_instance(AgentId("worker", "default"), Worker)


async def test_one_agent_handles_one_message_at_a_time_in_order_with_one_task() -> None:
    runtime, _ = await _runtime()
    runtime.start()
    tasks_before = len(asyncio.all_tasks())
    for n in range(300):
        await runtime.publish_message(Job(n), TOPIC)
    assert len(asyncio.all_tasks()) == tasks_before + 1  # one drain task, not one task per message
    await runtime.stop_when_idle()

    worker = await _worker(runtime)
    assert worker.done == list(range(300))
    assert worker.max_running == 1


async def test_a_fast_publisher_against_a_slow_agent_stays_within_the_bound_and_loses_nothing() -> None:
    runtime, failures = await _runtime(mailbox_capacity=8)
    runtime.start()
    for n in range(500):  # no await inside the agent would let it keep up: the publisher must wait
        await runtime.publish_message(Job(n), TOPIC)
        mailbox = runtime.mailbox(AgentId("worker", "default"))
        assert mailbox is not None and mailbox.occupancy <= 8
    await runtime.stop_when_idle()

    worker = await _worker(runtime)
    mailbox = runtime.mailbox(AgentId("worker", "default"))
    assert worker.done == list(range(500))
    assert mailbox is not None and mailbox.high_water == 8 and mailbox.overflowed == 0
    assert failures == []


async def test_the_dead_letter_policy_refuses_at_once_and_reports_each_refusal() -> None:
    gate = asyncio.Event()
    runtime, failures = await _runtime(lambda: Worker(gate=gate), mailbox_capacity=2, overflow="dead_letter")
    runtime.start()
    for n in range(5):
        await runtime.publish_message(Job(n), TOPIC)  # never waits, never raises
    gate.set()
    await runtime.stop_when_idle()

    assert (await _worker(runtime)).done == [0, 1]
    assert [message.n for _, message, _ in failures] == [2, 3, 4]
    assert all(isinstance(error, MailboxFullError) for _, _, error in failures)


async def test_a_publisher_that_waits_too_long_queues_over_the_bound_instead_of_deadlocking() -> None:
    gate = asyncio.Event()
    runtime, failures = await _runtime(lambda: Worker(gate=gate), mailbox_capacity=1, block_timeout=0.05)
    runtime.start()
    await runtime.publish_message(Job(1), TOPIC)
    await runtime.publish_message(Job(2), TOPIC)  # waits 0.05 s for room, then goes in anyway
    mailbox = runtime.mailbox(AgentId("worker", "default"))
    assert mailbox is not None and mailbox.overflowed == 1
    gate.set()
    await runtime.stop_when_idle()

    assert (await _worker(runtime)).done == [1, 2]
    assert failures == []


async def test_a_handler_that_raises_does_not_stop_the_drain_and_is_reported() -> None:
    runtime, failures = await _runtime(lambda: Worker(fail_on=2))
    runtime.start()
    for n in range(1, 5):
        await runtime.publish_message(Job(n), TOPIC)
    await runtime.stop_when_idle()

    assert (await _worker(runtime)).done == [1, 3, 4]
    [(agent, message, error)] = failures
    assert agent == AgentId("worker", "default") and message == Job(2)
    assert isinstance(error, RuntimeError) and "failed on purpose" in str(error)


async def test_without_a_hook_a_failing_handler_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    runtime = AUNActorRuntime()
    await runtime.register_factory("worker", lambda: Worker(fail_on=1))
    await runtime.add_subscription(TypeSubscription("work", "worker"))
    runtime.start()
    with caplog.at_level(logging.ERROR, logger="aun_runtime"):
        await runtime.publish_message(Job(1), TOPIC)
        await runtime.publish_message(Job(2), TOPIC)
        await runtime.stop_when_idle()
    assert (await _worker(runtime)).done == [2]
    assert any("worker/default" in r.getMessage() for r in caplog.records)


async def test_ignore_unhandled_exceptions_false_raises_the_first_failure_at_stop() -> None:
    runtime, _ = await _runtime(lambda: Worker(fail_on=1), ignore_unhandled_exceptions=False)
    runtime.start()
    await runtime.publish_message(Job(1), TOPIC)
    await runtime.publish_message(Job(2), TOPIC)
    with pytest.raises(RuntimeError, match="job 1 failed"):
        await runtime.stop_when_idle()
    assert (await _worker(runtime)).done == [2]


async def test_stop_with_messages_in_flight_neither_hangs_nor_raises_and_reports_them() -> None:
    gate = asyncio.Event()  # never set: the handler would wait forever
    runtime, failures = await _runtime(lambda: Worker(gate=gate))
    runtime.start()
    for n in range(10):
        await runtime.publish_message(Job(n), TOPIC)
    worker = await _worker(runtime)
    await asyncio.wait_for(worker.started.wait(), timeout=5)

    await asyncio.wait_for(runtime.stop(), timeout=5)

    assert worker.cancelled  # the handler was cancelled, and its cancellation token with it
    assert [message.n for _, message, _ in failures] == list(range(10))
    assert all(isinstance(error, RuntimeStoppedError) for _, _, error in failures)
    assert "being handled" in str(failures[0][2]) and "before" in str(failures[1][2])
    assert runtime.unprocessed_messages_count == 0
    mailbox = runtime.mailbox(AgentId("worker", "default"))
    assert mailbox is not None and mailbox.occupancy == 0

    gate.set()  # the runtime starts again and delivers as before
    runtime.start()
    await runtime.publish_message(Job(42), TOPIC)
    await runtime.stop_when_idle()
    assert worker.done == [42]


async def test_stop_when_idle_waits_for_what_handlers_publish() -> None:
    class Relay(RoutedAgent):
        """Passes each job on to the other relay, 50 times in all."""

        def __init__(self, to: str) -> None:
            super().__init__("relays")
            self.to = to

        @event
        async def on_job(self, message: Job, ctx: MessageContext) -> None:
            if message.n < 50:
                await asyncio.sleep(0)
                await self.publish_message(Job(message.n + 1), TopicId(self.to, "default"))

    runtime = AUNActorRuntime()
    seen: list[int] = []
    await runtime.register_factory("ping", lambda: Relay("to-pong"))
    await runtime.register_factory("pong", lambda: Relay("to-ping"))
    await runtime.register_factory("watch", lambda: _Watcher(seen))
    for topic, agent in (("to-ping", "ping"), ("to-pong", "pong"), ("to-ping", "watch"), ("to-pong", "watch")):
        await runtime.add_subscription(TypeSubscription(topic, agent))
    runtime.start()
    await runtime.publish_message(Job(0), TopicId("to-ping", "default"))
    await runtime.stop_when_idle()
    assert seen == list(range(51))


class _Watcher(RoutedAgent):
    def __init__(self, seen: list[int]) -> None:
        super().__init__("watches")
        self.seen = seen

    @event
    async def on_job(self, message: Job, ctx: MessageContext) -> None:
        self.seen.append(message.n)


async def test_a_busy_agent_lets_others_run_between_batches() -> None:
    order: list[str] = []

    class Tagger(RoutedAgent):
        def __init__(self) -> None:
            super().__init__("tags")

        @event
        async def on_job(self, message: Job, ctx: MessageContext) -> None:
            order.append(self.id.type)  # never awaits: only the drain can make room for others

    runtime = AUNActorRuntime()
    for name in ("a", "b"):
        await runtime.register_factory(name, Tagger)
        await runtime.add_subscription(TypeSubscription(f"to-{name}", name))
    for n in range(3 * DRAIN_BATCH):
        await runtime.publish_message(Job(n), TopicId("to-a", "default"))
    for n in range(3):
        await runtime.publish_message(Job(n), TopicId("to-b", "default"))
    runtime.start()
    await runtime.stop_when_idle()
    assert order.index("b") < order.index("a") + 2 * DRAIN_BATCH  # b did not wait for all of a
    assert order.count("a") == 3 * DRAIN_BATCH and order.count("b") == 3


async def test_rpc_is_refused_before_anything_is_queued() -> None:
    runtime, _ = await _runtime()
    runtime.start()
    with pytest.raises(RPCForbiddenError):
        await runtime.send_message(Job(1), AgentId("worker", "default"))
    worker = await _worker(runtime)
    with pytest.raises(RPCForbiddenError):
        await worker.send_message(Job(1), AgentId("worker", "default"))
    await asyncio.wait_for(runtime.stop_when_idle(), timeout=5)
    assert worker.done == []


async def test_publishing_before_start_queues_and_idle_refuses_to_wait_forever() -> None:
    runtime, _ = await _runtime()
    await runtime.publish_message(Job(1), TOPIC)
    with pytest.raises(RuntimeError, match="not started"):
        await runtime.idle()
    runtime.start()
    with pytest.raises(RuntimeError, match="already started"):
        runtime.start()
    await runtime.idle()
    assert (await _worker(runtime)).done == [1]
    await runtime.stop()
    with pytest.raises(RuntimeError, match="not started"):
        await runtime.stop()


async def test_lookup_errors_match_autogen_core() -> None:
    runtime, failures = await _runtime()
    with pytest.raises(LookupError):
        await runtime.try_get_underlying_agent_instance(AgentId("nobody", "default"))
    with pytest.raises(TypeError, match="not of type"):
        await runtime.try_get_underlying_agent_instance(AgentId("worker", "default"), _Watcher)
    with pytest.raises(ValueError, match="already exists"):
        await runtime.register_factory("worker", lambda: Worker())

    await runtime.add_subscription(TypeSubscription("work", "ghost"))  # subscribed, never registered
    runtime.start()
    await runtime.publish_message(Job(1), TOPIC)
    await runtime.stop_when_idle()
    assert (await _worker(runtime)).done == [1]  # the others still got it
    [(agent, _, error)] = failures
    assert agent.type == "ghost" and isinstance(error, UndeliverableError)


async def test_a_factory_that_fails_makes_its_queued_messages_undeliverable() -> None:
    def broken() -> Worker:
        raise RuntimeError("cannot build")

    runtime, failures = await _runtime(broken)
    runtime.start()
    for n in range(3):
        await runtime.publish_message(Job(n), TOPIC)
    await runtime.stop_when_idle()
    assert [message.n for _, message, _ in failures] == [0, 1, 2]
    assert all("cannot build" in str(error) for _, _, error in failures)


async def test_a_factory_of_the_wrong_class_is_refused_and_what_it_made_is_closed() -> None:
    made: list[_Watcher] = []

    class _ClosingWatcher(_Watcher):
        closed = False

        async def close(self) -> None:
            self.closed = True

    def factory() -> _Watcher:
        made.append(_ClosingWatcher([]))
        return made[-1]

    runtime = AUNActorRuntime()
    await runtime.register_factory("worker", factory, expected_class=Worker)
    with pytest.raises(ValueError, match="wrong type"):
        await runtime.get("worker", lazy=False)
    assert [watcher.closed for watcher in made] == [True]  # never used: released at once


async def test_state_metadata_and_registered_instances() -> None:
    runtime, _ = await _runtime()
    runtime.start()
    for n in range(3):
        await runtime.publish_message(Job(n), TOPIC)
    await runtime.idle()
    agent = AgentId("worker", "default")
    assert (await runtime.agent_metadata(agent))["description"] == "works"
    assert await runtime.agent_save_state(agent) == {"done": [0, 1, 2]}
    saved = await runtime.save_state()
    assert saved == {"worker/default": {"done": [0, 1, 2]}}

    other = AUNActorRuntime()
    await other.register_factory("worker", lambda: Worker())
    await other.load_state(saved)  # nothing is created to load it: the state waits
    assert other.instances == 0 and other.saved_states == 1
    assert await other.save_state() == saved
    restored = await other.try_get_underlying_agent_instance(agent, Worker)
    assert restored.done == [0, 1, 2] and other.saved_states == 0

    instance = Worker()
    await runtime.register_agent_instance(instance, AgentId("solo", "default"))
    with pytest.raises(ValueError, match="already exists"):
        await runtime.register_agent_instance(Worker(), AgentId("solo", "default"))
    with pytest.raises(ValueError, match="cannot be registered to the same type"):
        await runtime.register_agent_instance(Worker(), AgentId("worker", "other"))
    assert await runtime.try_get_underlying_agent_instance(AgentId("solo", "default")) is instance
    await runtime.stop()


async def test_a_key_of_an_instance_type_that_was_never_registered_is_refused_as_autogen_core_does() -> None:
    runtime, failures = await _runtime()
    await runtime.register_agent_instance(Worker(), AgentId("solo", "default"))
    await runtime.add_subscription(TypeSubscription("solo-work", "solo"))
    with pytest.raises(LookupError, match="not found"):
        await runtime.try_get_underlying_agent_instance(AgentId("solo", "other"))
    runtime.start()
    await runtime.publish_message(Job(7), TopicId("solo-work", "other"))  # maps to solo/other: none
    await runtime.publish_message(Job(8), TopicId("solo-work", "default"))
    await runtime.stop_when_idle()
    [(agent, _, error)] = failures
    assert agent == AgentId("solo", "other") and isinstance(error, UndeliverableError)
    assert "registered instances" in str(error)
    assert (await runtime.try_get_underlying_agent_instance(AgentId("solo", "default"), Worker)).done == [8]
    assert AgentId("solo", "other") not in runtime._cells  # nothing was kept for the refused key
