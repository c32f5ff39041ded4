"""`wait_set`: an event or a timeout, and a cancellation is never lost, even one that comes in the
turn the event is set (where Python 3.11's `asyncio.wait_for` returns as if nothing happened)."""

from __future__ import annotations

import asyncio

import pytest

from aun_runtime.base._waiting import wait_set


async def test_it_returns_true_once_the_event_is_set_and_false_when_the_time_runs_out() -> None:
    event = asyncio.Event()
    assert await wait_set(event, 0.01) is False
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await wait_set(event, 5) is True
    assert await wait_set(event, 0) is True  # already set: no wait at all
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]  # no waiter left behind


async def test_a_cancel_in_the_turn_the_event_is_set_still_cancels_the_waiter() -> None:
    for _ in range(20):  # the same turn every time: the set and the cancel are made back to back
        event = asyncio.Event()
        waiter = asyncio.ensure_future(wait_set(event, 10))
        await asyncio.sleep(0)  # the waiter is waiting
        event.set()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert waiter.cancelled()


async def test_a_loop_that_waits_with_it_ends_when_cancelled() -> None:
    # What the gateway agent's links do while the client is not ready: wait for a state change,
    # look again. Stopping cancels them, and a state change may come in the same turn.
    changed = asyncio.Event()
    rounds = 0

    async def poll() -> None:
        nonlocal rounds
        while True:
            changed.clear()
            await wait_set(changed, 0.05)
            rounds += 1

    task = asyncio.ensure_future(poll())
    await asyncio.sleep(0)
    changed.set()
    task.cancel()
    done, _ = await asyncio.wait((task,), timeout=2)
    assert done and task.cancelled() and rounds == 0

