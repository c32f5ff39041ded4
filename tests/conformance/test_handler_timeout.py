"""A stuck turn is bounded: past its handler timeout it is cancelled, its message is a dead letter
that says so, and the agent takes its next message. A stop gives the turns in flight a grace."""

from __future__ import annotations

import asyncio

import pytest

from aun_runtime import AUNAgent, HandlerTimeoutError, RecordKind
from aun_runtime.testing import Recorder, Stuck

from .conftest import RuntimeFactory


def _reasons(runtime: object) -> list[str]:
    return [record.reason or "" for record in runtime.archive.dead_letters()]  # type: ignore[attr-defined]


async def test_a_stuck_handler_is_cut_off_and_the_next_message_is_answered(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(handler_timeout=0.3)
    await runtime.register_agent("stuck.local", Stuck)
    inbox = await runtime.open_inbox()
    await runtime.start()

    stuck_message = await inbox.send("stuck.local", "hang on this")
    await inbox.send("stuck.local", "and this?")
    answer = await inbox.next(timeout=10)
    assert answer is not None and answer.text == "answered: and this?"
    await runtime.settle()

    [dead] = runtime.archive.dead_letters()
    assert dead.owner == "stuck.local" and dead.message == stuck_message
    reason = dead.reason or ""
    assert reason.startswith("HandlerTimeoutError: the handler of stuck.local ran 0.")
    assert "past its handler_timeout of 0.3 s, and was cancelled" in reason
    assert runtime.stats.handler_timeouts == 1 and runtime.stats.dead_letters == 1
    assert "!! DEAD LETTER at stuck.local: HandlerTimeoutError" in runtime.transcript()
    agent = await runtime.agent_instance("stuck.local", Stuck)
    assert agent.hanging == 0 and agent.answered == ["and this?"]


async def test_an_agent_registered_with_its_own_timeout_keeps_it(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(handler_timeout=0.2)
    await runtime.register_agent("patient.local", lambda: Stuck(delay=0.6), handler_timeout=None)
    await runtime.register_agent("hasty.local", Stuck, handler_timeout=0.1)
    inbox = await runtime.open_inbox()
    await runtime.start()

    await inbox.send("patient.local", "take your time")  # three times the runtime's timeout: no limit here
    await inbox.send("hasty.local", "hang")
    answer = await inbox.next(timeout=10)
    assert answer is not None and answer.text == "answered: take your time"
    await runtime.settle()
    [dead] = runtime.archive.dead_letters()
    assert dead.owner == "hasty.local" and "handler_timeout of 0.1 s" in (dead.reason or "")


class StuckAtStart(AUNAgent):
    """Means to speak first, and its on_start never returns."""

    async def on_start(self) -> None:
        await asyncio.Event().wait()


class StuckSchedule(AUNAgent):
    """Schedules an action that sends once, then waits forever."""

    async def on_start(self) -> None:
        self.schedule(self.act)

    async def act(self) -> None:
        await self.send("listener.local", "before the wait")
        await asyncio.Event().wait()


async def test_proactive_turns_are_bounded_too(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(handler_timeout=0.2)
    await runtime.register_agent("listener.local", Recorder)
    await runtime.register_agent("starter.local", StuckAtStart)
    await runtime.register_agent("scheduler.local", StuckSchedule)
    await runtime.start()  # on_start is awaited by start(): it returns once the timeout cut it off
    listener = await runtime.agent_instance("listener.local", Recorder)
    for _ in range(200):
        if len(runtime.archive.dead_letters()) == 2:
            break
        await asyncio.sleep(0.02)
    reasons = sorted(_reasons(runtime))
    assert reasons[0].startswith("HandlerTimeoutError: a proactive action of scheduler.local ran 0.")
    assert reasons[1].startswith("HandlerTimeoutError: on_start of starter.local ran 0.")
    assert [m.text for m in listener.received] == ["before the wait"]


@pytest.mark.parametrize("handler_timeout", [0, -1.0])
async def test_a_timeout_that_is_not_positive_is_refused(make_runtime: RuntimeFactory, handler_timeout: float) -> None:
    with pytest.raises(ValueError, match="positive number of seconds, or None"):
        await make_runtime(handler_timeout=handler_timeout)
    runtime = await make_runtime()
    with pytest.raises(ValueError, match="positive number of seconds, or None"):
        await runtime.register_agent("x.local", Recorder, handler_timeout=handler_timeout)


async def test_a_stop_with_grace_lets_turns_end_and_cuts_off_the_stuck(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(handler_timeout=None)
    await runtime.register_agent("slow.local", lambda: Stuck(delay=0.3))
    await runtime.register_agent("stuck.local", Stuck)
    inbox = await runtime.open_inbox()
    await runtime.start()
    await inbox.send("slow.local", "finish me")
    await inbox.send("stuck.local", "hang")
    slow = await runtime.agent_instance("slow.local", Stuck)
    stuck = await runtime.agent_instance("stuck.local", Stuck)
    for _ in range(200):
        if stuck.hanging:
            break
        await asyncio.sleep(0.01)
    await runtime.stop(grace=1.0)

    assert slow.answered == ["finish me"]  # it was in flight: the grace let it end
    assert stuck.hanging == 0  # cut off once the grace was over
    assert runtime.archive.count(owner="slow.local", kind=RecordKind.SENT) == 1


async def test_the_timeout_error_names_the_timeout_and_the_time_it_ran() -> None:
    error = HandlerTimeoutError("a.local", "the handler", 2.04, 2.0)
    assert str(error).startswith("the handler of a.local ran 2.0 s, past its handler_timeout of 2 s")
    assert (error.aid, error.ran, error.timeout) == ("a.local", 2.04, 2.0)
