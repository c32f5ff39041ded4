"""Waiting for an event with a timeout, without losing a cancellation.

Python 3.11's `asyncio.wait_for` returns the result, and drops the cancellation, when the awaited
future completes in the same turn as the task waiting for it is cancelled. A loop that waits for an
event with a timeout, and is stopped by a cancel, may then run on: the stop waits for it in vain.
`wait_set` waits with `asyncio.wait`, which raises a cancellation whenever one comes.
"""

from __future__ import annotations

import asyncio

__all__ = ["wait_set"]


async def wait_set(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until `event` is set or `timeout` seconds have passed (None: no limit).

    Returns:
        True if the event is set, False if the time ran out first.

    Raises:
        asyncio.CancelledError: the waiting task was cancelled, even in the turn the event was set.
    """
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait((waiter,), timeout=timeout)
    finally:
        waiter.cancel()  # stops waiting when the time ran out or this task was cancelled
    return bool(done)
