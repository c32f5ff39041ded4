"""AUNActorRuntime when things go wrong around a handler: cancellations, a failing hook, stop() at odd
moments, activations that are cut short. Every case must leave the count of unfinished messages and
the mailboxes exact, report each message that was not handled, and let the rest be delivered."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from autogen_core import (
    AgentId,
    CancellationToken,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
    event,
)

from aun_runtime import AUNActorRuntime, RuntimeStoppedError
from aun_runtime.base._errors import UndeliverableError

TOPIC = TopicId("work", "default")
WORKER = AgentId("worker", "default")


@dataclass
class Job:
    n: int


class Worker(RoutedAgent):
    """Records each job; job 0 waits (for ``gate``, or for a future tied to its cancellation token)."""

    def __init__(self, gate: asyncio.Event | None = None, on_zero: str = "gate") -> None:
        super().__init__("works")
        self.done: list[int] = []
        self.gate = gate
        self.on_zero = on_zero
        self.started = asyncio.Event()
        self.closed = False

    @event
    async def on_job(self, message: Job, ctx: MessageContext) -> None:
        if message.n == 0:
            self.started.set()
            if self.on_zero == "token":
                waiting: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                ctx.cancellation_token.link_future(waiting)
                await waiting
            elif self.gate is not None:
                await self.gate.wait()
        self.done.append(message.n)

    async def save_state(self) -> Mapping[str, Any]:
        return {"done": list(self.done)}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        if "broken" in state:
            raise ValueError("unreadable state")
        self.done = list(state["done"])

    async def close(self) -> None:
        self.closed = True


@dataclass
class Interrupted:
    n: int


Failure = tuple[AgentId, Any, BaseException]


async def _runtime(make: Any = Worker, **options: Any) -> tuple[AUNActorRuntime, list[Failure]]:
    runtime = AUNActorRuntime(idle_timeout=None, **options)
    failures: list[Failure] = []
    runtime.attach(on_undeliverable=lambda agent, message, error: failures.append((agent, message, error)))
    await runtime.register_factory("worker", make)
    await runtime.add_subscription(TypeSubscription("work", "worker"))
    return runtime, failures


def _settled(runtime: AUNActorRuntime) -> bool:
    mailbox = runtime.mailbox(WORKER)
    return runtime.unprocessed_messages_count == 0 and (mailbox is None or mailbox.occupancy == 0)


async def test_a_handler_cancelled_through_its_token_fails_that_message_only() -> None:
    runtime, failures = await _runtime(lambda: Worker(on_zero="token"), ignore_unhandled_exceptions=False)
    runtime.start()
    token = CancellationToken()
    await runtime.publish_message(Job(0), TOPIC, cancellation_token=token)
    await runtime.publish_message(Job(1), TOPIC)
    worker = await runtime.try_get_underlying_agent_instance(WORKER, Worker)
    await asyncio.wait_for(worker.started.wait(), timeout=5)

    token.cancel()  # the publisher takes the message back: its handler ends with CancelledError
    await asyncio.wait_for(runtime.idle(), timeout=5)

    assert worker.done == [1]
    [(agent, message, error)] = failures
    assert agent == WORKER and message == Job(0) and isinstance(error, asyncio.CancelledError)
    assert _settled(runtime)
    await runtime.stop()  # a cancelled message is no handler error: stop() does not raise it


async def test_a_drain_cancelled_from_outside_reports_its_message_and_delivers_the_rest() -> None:
    gate = asyncio.Event()
    runtime, failures = await _runtime(lambda: Worker(gate=gate))
    runtime.start()
    for n in range(3):
        await runtime.publish_message(Job(n), TOPIC)
    worker = await runtime.try_get_underlying_agent_instance(WORKER, Worker)
    await asyncio.wait_for(worker.started.wait(), timeout=5)
    drain = runtime._cells[WORKER].task
    assert drain is not None

    drain.cancel()
    await asyncio.wait_for(runtime.idle(), timeout=5)

    assert worker.done == [1, 2]
    assert [message for _, message, _ in failures] == [Job(0)]
    assert _settled(runtime)
    await runtime.stop()


async def test_a_hook_that_raises_is_logged_and_delivery_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    class Failing(Worker):
        @event
        async def on_job(self, message: Job, ctx: MessageContext) -> None:
            if message.n == 0:
                raise RuntimeError("job 0 failed")
            self.done.append(message.n)

    def hook(agent: AgentId, message: Any, error: BaseException) -> None:
        raise OSError("the archive is unavailable")

    runtime, _ = await _runtime(Failing)
    runtime.attach(on_undeliverable=hook)
    await runtime.add_subscription(TypeSubscription("work", "ghost"))  # subscribed, never registered
    runtime.start()
    with caplog.at_level(logging.ERROR, logger="aun_runtime"):
        await runtime.publish_message(Job(0), TOPIC)  # the ghost's report fails: the publish goes on
        await runtime.publish_message(Job(1), TOPIC)
        await asyncio.wait_for(runtime.idle(), timeout=5)

    worker = await runtime.try_get_underlying_agent_instance(WORKER, Failing)
    assert worker.done == [1]
    assert _settled(runtime)
    hook_errors = [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], OSError)]
    assert len(hook_errors) == 3  # ghost twice, the failed job once
    await runtime.stop()


async def test_a_message_published_while_stop_waits_for_handlers_is_reported_too() -> None:
    class Noisy(Worker):
        """Tells another agent, one with no cell yet, when its handler is cancelled."""

        @event
        async def on_job(self, message: Job, ctx: MessageContext) -> None:
            self.started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                await self.publish_message(Interrupted(message.n), TopicId("told", "default"))
                raise

    told: list[int] = []

    class Listener(RoutedAgent):
        def __init__(self) -> None:
            super().__init__("listens")

        @event
        async def on_interrupted(self, message: Interrupted, ctx: MessageContext) -> None:
            told.append(message.n)

    runtime, failures = await _runtime(Noisy)
    await runtime.register_factory("listener", Listener)
    await runtime.add_subscription(TypeSubscription("told", "listener"))
    runtime.start()
    await runtime.publish_message(Job(0), TOPIC)
    worker = await runtime.try_get_underlying_agent_instance(WORKER, Noisy)
    await asyncio.wait_for(worker.started.wait(), timeout=5)

    await asyncio.wait_for(runtime.stop(), timeout=5)

    assert [(agent.type, message) for agent, message, _ in failures] == [
        ("worker", Job(0)),
        ("listener", Interrupted(0)),
    ]
    assert all(isinstance(error, RuntimeStoppedError) for _, _, error in failures)
    assert runtime.unprocessed_messages_count == 0
    listener_mailbox = runtime.mailbox(AgentId("listener", "default"))
    assert listener_mailbox is None or listener_mailbox.occupancy == 0

    runtime.start()  # nothing left over: the count stays exact
    await runtime.publish_message(Job(1), TOPIC)
    for _ in range(5):
        await asyncio.sleep(0)
    assert runtime.unprocessed_messages_count == 1
    await runtime.stop()
    assert told == []


async def test_stop_called_by_a_handler_returns_and_reports_what_was_not_handled() -> None:
    outcome: list[str] = []
    stopped = asyncio.Event()

    class Stopper(Worker):
        @event
        async def on_job(self, message: Job, ctx: MessageContext) -> None:
            try:
                await self.runtime.stop()  # type: ignore[attr-defined]
                outcome.append("returned")
            except BaseException as error:
                outcome.append(type(error).__name__)
                raise
            finally:
                stopped.set()

    runtime, failures = await _runtime(Stopper)
    await runtime.publish_message(Job(0), TOPIC)
    await runtime.publish_message(Job(1), TOPIC)
    runtime.start()
    await asyncio.wait_for(stopped.wait(), timeout=5)
    for _ in range(5):  # let the handler and its drain end
        await asyncio.sleep(0)

    assert outcome == ["returned"]
    assert [message for _, message, _ in failures] == [Job(0), Job(1)]
    assert all(isinstance(error, RuntimeStoppedError) for _, _, error in failures)
    assert _settled(runtime)
    runtime.start()  # and it starts again
    await runtime.stop()


async def test_a_caller_that_gives_up_on_an_activation_does_not_cancel_it_for_the_drain() -> None:
    gate = asyncio.Event()

    async def slow() -> Worker:
        await gate.wait()
        return Worker()

    runtime, failures = await _runtime(slow)
    runtime.start()
    impatient = asyncio.create_task(runtime.try_get_underlying_agent_instance(WORKER))
    await asyncio.sleep(0)  # it starts the activation
    await runtime.publish_message(Job(1), TOPIC)
    await asyncio.sleep(0)  # the drain waits for the same activation
    impatient.cancel()  # as a wait_for() that timed out would
    with pytest.raises(asyncio.CancelledError):
        await impatient
    gate.set()

    await asyncio.wait_for(runtime.idle(), timeout=5)

    assert (await runtime.try_get_underlying_agent_instance(WORKER, Worker)).done == [1]
    assert failures == [] and _settled(runtime)
    await runtime.stop()


async def test_stop_during_an_activation_does_not_cancel_another_callers_wait() -> None:
    gate = asyncio.Event()
    made = 0

    async def slow() -> Worker:
        nonlocal made
        made += 1
        await gate.wait()
        return Worker()

    runtime, failures = await _runtime(slow)
    runtime.start()
    await runtime.publish_message(Job(1), TOPIC)  # the drain starts the activation
    await asyncio.sleep(0)
    caller = asyncio.create_task(runtime.try_get_underlying_agent_instance(WORKER, Worker))
    await asyncio.sleep(0)  # it waits for the same activation

    await asyncio.wait_for(runtime.stop(), timeout=5)
    gate.set()
    worker = await asyncio.wait_for(caller, timeout=5)  # the caller was not cancelled: it gets its agent

    assert isinstance(worker, Worker) and made == 2
    assert [message for _, message, _ in failures] == [Job(1)]
    assert isinstance(failures[0][2], RuntimeStoppedError)
    assert _settled(runtime)


async def test_a_factory_interrupted_by_stop_is_not_logged_as_a_construction_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def never() -> Worker:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    runtime, failures = await _runtime(never)
    runtime.start()
    await runtime.publish_message(Job(1), TOPIC)
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger="aun_runtime"):
        await asyncio.wait_for(runtime.stop(), timeout=5)
    assert not [r for r in caplog.records if "constructing" in r.getMessage()]
    assert [message for _, message, _ in failures] == [Job(1)]


async def test_an_instance_whose_state_cannot_be_loaded_is_closed_and_the_state_kept() -> None:
    made: list[Worker] = []

    def make() -> Worker:
        made.append(Worker())
        return made[-1]

    runtime, _ = await _runtime(make)
    await runtime.load_state({"worker/default": {"broken": True}})
    with pytest.raises(ValueError, match="unreadable state"):
        await runtime.try_get_underlying_agent_instance(WORKER)
    assert len(made) == 1 and made[0].closed
    assert runtime.instances == 0 and runtime.saved_states == 1


async def test_a_factory_that_raises_cancelled_error_fails_its_messages_without_cancelling_callers() -> None:
    async def cancelled() -> Worker:
        raise asyncio.CancelledError

    runtime, failures = await _runtime(cancelled)
    runtime.start()
    await runtime.publish_message(Job(1), TOPIC)
    await asyncio.wait_for(runtime.idle(), timeout=5)
    with pytest.raises(UndeliverableError, match="was cancelled"):
        await runtime.try_get_underlying_agent_instance(WORKER)

    assert [message for _, message, _ in failures] == [Job(1)]
    assert isinstance(failures[0][2], UndeliverableError)
    assert _settled(runtime)
    await runtime.stop()


async def test_a_handler_that_waits_for_idle_gets_an_error_instead_of_waiting_forever() -> None:
    failures: list[BaseException] = []
    waited_in_a_task = asyncio.Event()
    runtime = AUNActorRuntime(idle_timeout=None)
    runtime.attach(on_undeliverable=lambda _agent, _message, error: failures.append(error))

    class Impatient(RoutedAgent):
        def __init__(self) -> None:
            super().__init__("waits for everyone, itself included")

        @event
        async def on_job(self, message: Job, ctx: MessageContext) -> None:
            if message.n == 0:
                await runtime.stop_when_idle()  # would wait for this very message
                return

            async def wait() -> None:  # a task the handler starts may wait: it is not the handler
                await runtime.idle()
                waited_in_a_task.set()

            asyncio.get_running_loop().create_task(wait())

    await runtime.register_factory("impatient", Impatient)
    await runtime.add_subscription(TypeSubscription("work", "impatient"))
    runtime.start()
    await runtime.publish_message(Job(0), TOPIC)
    await asyncio.wait_for(runtime.idle(), 5)
    assert len(failures) == 1 and "would wait forever" in str(failures[0])
    await runtime.publish_message(Job(1), TOPIC)
    await asyncio.wait_for(waited_in_a_task.wait(), 5)
    await runtime.stop()
