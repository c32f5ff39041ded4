"""The Mailbox on its own: room is handed out first come, first served, and never lost."""

from __future__ import annotations

import asyncio

import pytest

from aun_runtime import Mailbox, MailboxFullError


async def test_waiting_senders_get_room_in_arrival_order_and_nobody_jumps_the_queue() -> None:
    mailbox = Mailbox(capacity=1)
    assert mailbox.try_reserve("first")
    order: list[str] = []

    async def sender(name: str) -> None:
        await mailbox.reserve(name)
        order.append(name)

    waiting = [asyncio.create_task(sender(f"s{n}")) for n in range(3)]
    await asyncio.sleep(0)
    assert mailbox.waiting_senders == 3
    mailbox.release()  # the place goes to s0 at once...
    assert not mailbox.try_reserve("latecomer")  # ...so a latecomer cannot take it meanwhile
    assert not mailbox.take_if_room("unreserved")
    for _ in range(3):
        await asyncio.sleep(0)
        mailbox.release()
    await asyncio.gather(*waiting)
    assert order == ["s0", "s1", "s2"]
    assert mailbox.high_water == 1


async def test_a_cancelled_sender_gives_its_place_back() -> None:
    mailbox = Mailbox(capacity=1)
    mailbox.try_reserve("held")
    first = asyncio.create_task(mailbox.reserve("first"))
    second = asyncio.create_task(mailbox.reserve("second"))
    await asyncio.sleep(0)
    mailbox.release()  # handed to `first`...
    first.cancel()  # ...which is cancelled before it wakes up
    await asyncio.gather(first, return_exceptions=True)
    await second  # the place went on to the next in line
    assert mailbox.occupancy == 1 and mailbox.waiting_senders == 0


async def test_block_times_out_and_dead_letter_refuses_at_once() -> None:
    blocking = Mailbox(capacity=1, block_timeout=0.01)
    blocking.try_reserve("a")
    with pytest.raises(MailboxFullError, match="stayed full"):
        await blocking.reserve("b")
    assert blocking.waiting_senders == 0 and blocking.occupancy == 1

    refusing = Mailbox(capacity=1, overflow="dead_letter")
    refusing.try_reserve("a")
    with pytest.raises(MailboxFullError, match="mailbox full"):
        await refusing.reserve("b")
    assert not await refusing.enter("c")


async def test_entering_after_the_timeout_goes_over_the_bound_and_counts_it() -> None:
    mailbox = Mailbox(capacity=1, block_timeout=0.01)
    assert mailbox.take_if_room("a")
    assert await mailbox.enter("b")
    assert mailbox.occupancy == 2 and mailbox.overflowed == 1


async def test_a_reservation_is_consumed_by_its_arrival_and_can_be_cancelled() -> None:
    mailbox = Mailbox(capacity=2)
    await mailbox.reserve("m")
    await mailbox.reserve("m")  # the same id twice (a retry): two places
    assert mailbox.take_if_room("m") and mailbox.occupancy == 2
    mailbox.cancel_reservation("m")
    assert mailbox.occupancy == 1
    mailbox.cancel_reservation("m")  # nothing left to cancel: no change
    assert mailbox.occupancy == 1
    assert mailbox.arrive("other")  # a task-per-message core admits at once
    assert not mailbox.take_if_room("third")


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="capacity"):
        Mailbox(capacity=0)
    with pytest.raises(ValueError, match="block_timeout"):
        Mailbox(block_timeout=-1)
    with pytest.raises(ValueError):
        Mailbox(overflow="drop")
