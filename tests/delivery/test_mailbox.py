"""Mailbox turn-taking: strict arrival order, and a cancelled waiter never blocks the ones behind it."""

from __future__ import annotations

import asyncio

import pytest

from aun_runtime import Mailbox, MailboxFullError, OverflowPolicy


async def test_turns_are_taken_in_arrival_order_one_at_a_time() -> None:
    mailbox = Mailbox(capacity=10)
    order: list[int] = []
    running = 0

    async def handle(n: int) -> None:
        nonlocal running
        running += 1
        assert running == 1
        await asyncio.sleep(0.001 * (5 - n % 5))
        order.append(n)
        running -= 1

    await asyncio.gather(*(mailbox.take_turn(handle(n)) for n in range(10)))
    assert order == list(range(10))


async def test_a_waiter_cancelled_in_line_gives_up_its_place() -> None:
    mailbox = Mailbox(capacity=10)
    gate = asyncio.Event()
    done: list[str] = []

    async def handle(name: str, wait: bool = False) -> None:
        if wait:
            await gate.wait()
        done.append(name)

    first = asyncio.create_task(mailbox.take_turn(handle("first", wait=True)))
    second = asyncio.create_task(mailbox.take_turn(handle("second")))
    third = asyncio.create_task(mailbox.take_turn(handle("third")))
    await asyncio.sleep(0)
    second.cancel()
    gate.set()
    await asyncio.gather(first, third)
    assert done == ["first", "third"]
    with pytest.raises(asyncio.CancelledError):
        await second


async def test_reservations_count_against_the_bound() -> None:
    mailbox = Mailbox(capacity=2, overflow=OverflowPolicy.DEAD_LETTER)
    await mailbox.reserve("a")
    await mailbox.reserve("b")
    with pytest.raises(MailboxFullError):
        await mailbox.reserve("c")
    assert mailbox.arrive("a") and mailbox.arrive("b")  # reserved ones are let in
    assert not mailbox.arrive("d")  # an unreserved one meets a full mailbox
    mailbox.release()
    assert mailbox.arrive("d")
    assert mailbox.high_water == 2
