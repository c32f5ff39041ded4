"""The mailbox: one message at a time per agent, in arrival order, with a bound.

autogen-core starts a task per delivered message, so one agent may run many handlers at once and
finish them out of order. An actor does not: it takes its messages one by one. The mailbox gives
each agent that discipline and puts a bound on how much may wait for it.

Occupancy counts every message that is promised to, waiting in, or being handled by the mailbox.
Senders in this process *reserve* a place before they publish (the send tools do this), so with the
``block`` policy a fast sender waits for a slow receiver instead of piling messages up. Messages that
arrive without a reservation (published by raw autogen-core calls, or from another process) cannot be
pushed back; under ``block`` they queue anyway and are counted as ``overflowed``, under
``dead_letter`` they are refused and recorded as dead letters. Nothing is dropped silently.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Awaitable
from enum import StrEnum
from typing import TypeVar

from ._errors import MailboxFullError

__all__ = ["DEFAULT_BLOCK_TIMEOUT", "DEFAULT_MAILBOX_CAPACITY", "Mailbox", "OverflowPolicy"]

#: Messages that may wait for one agent. Large enough to absorb a burst, small enough that a flood
#: against a slow agent is felt by its senders at once rather than after memory has grown.
DEFAULT_MAILBOX_CAPACITY = 1024
#: Seconds a sender waits for room under ``block`` before the message becomes a dead letter. Long
#: enough for any handler that makes progress; finite so that two full mailboxes waiting on each
#: other (A sends to B while B sends to A) cannot hang a runtime forever.
DEFAULT_BLOCK_TIMEOUT = 30.0

T = TypeVar("T")


class OverflowPolicy(StrEnum):
    """What happens when a message meets a full mailbox."""

    BLOCK = "block"  #: local senders wait for room (backpressure); see the module docstring
    DEAD_LETTER = "dead_letter"  #: refused at once and recorded as a dead letter


class Mailbox:
    """A bounded FIFO turn-taker for one agent.

    Args:
        capacity: how many messages may be reserved for, waiting in, or handled by this mailbox.
        overflow: the policy when it is full.
        block_timeout: seconds a sender waits for room under ``block``.
    """

    __slots__ = (
        "_busy",
        "_reserved",
        "_room",
        "_turns",
        "block_timeout",
        "capacity",
        "high_water",
        "occupancy",
        "overflow",
        "overflowed",
    )

    def __init__(
        self,
        capacity: int = DEFAULT_MAILBOX_CAPACITY,
        overflow: OverflowPolicy = OverflowPolicy.BLOCK,
        block_timeout: float = DEFAULT_BLOCK_TIMEOUT,
    ) -> None:
        if capacity < 1:
            raise ValueError("a mailbox needs a capacity of at least 1")
        self.capacity = capacity
        self.overflow = OverflowPolicy(overflow)
        self.block_timeout = block_timeout
        self.occupancy = 0
        self.high_water = 0
        self.overflowed = 0
        self._reserved: Counter[str] = Counter()
        self._busy = False  # a message is being handled
        self._turns: deque[asyncio.Future[None]] = deque()  # messages waiting for their turn, in order
        self._room: asyncio.Event | None = None

    @property
    def full(self) -> bool:
        return self.occupancy >= self.capacity

    async def reserve(self, message_id: str) -> None:
        """Promise a place to a message about to be published.

        Raises:
            MailboxFullError: the mailbox is full and the policy is ``dead_letter``, or it stayed
                full for ``block_timeout`` seconds.
        """
        if self.occupancy >= self.capacity:
            if self.overflow is OverflowPolicy.DEAD_LETTER:
                raise MailboxFullError(f"mailbox full ({self.capacity} messages)")
            await self._wait_for_room()
        self._take()
        self._reserved[message_id] += 1

    def cancel_reservation(self, message_id: str) -> None:
        """Give back a place reserved for a message that was not published after all."""
        if self._reserved[message_id] > 0:
            self._reserved[message_id] -= 1
            if not self._reserved[message_id]:
                del self._reserved[message_id]
            self.release()

    def arrive(self, message_id: str) -> bool:
        """Account for a message arriving. False means: refuse it (full, ``dead_letter`` policy)."""
        count = self._reserved.get(message_id)
        if count:
            if count == 1:
                del self._reserved[message_id]
            else:
                self._reserved[message_id] = count - 1
            return True
        if self.occupancy >= self.capacity:
            if self.overflow is OverflowPolicy.DEAD_LETTER:
                return False
            self.overflowed += 1
        self._take()
        return True

    async def take_turn(self, handle: Awaitable[T]) -> T:
        """Await ``handle`` when every message that arrived before has been handled.

        The turn passes straight to the next waiter, so no later arrival can overtake an earlier one.
        """
        if self._busy:
            turn = asyncio.get_running_loop().create_future()
            self._turns.append(turn)
            try:
                await turn
            except asyncio.CancelledError:
                if turn.done() and not turn.cancelled():
                    self._pass_turn()  # it was ours already: hand it on
                if asyncio.iscoroutine(handle):
                    handle.close()  # never started, and never will be
                raise
        else:
            self._busy = True
        try:
            return await handle
        finally:
            self._pass_turn()

    def _pass_turn(self) -> None:
        turns = self._turns
        while turns:
            turn = turns.popleft()
            if not turn.done():  # a waiter cancelled while waiting has given up its place
                turn.set_result(None)
                return
        self._busy = False

    def release(self) -> None:
        """A message is done (handled, filtered or failed): free its place."""
        self.occupancy -= 1
        if self._room is not None and self.occupancy < self.capacity:
            self._room.set()
            self._room = None

    def _take(self) -> None:
        self.occupancy += 1
        if self.occupancy > self.high_water:
            self.high_water = self.occupancy

    async def _wait_for_room(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.block_timeout
        while self.occupancy >= self.capacity:
            if self._room is None:
                self._room = asyncio.Event()
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise MailboxFullError(
                    f"mailbox stayed full ({self.capacity} messages) for {self.block_timeout:g} s"
                )
            try:
                await asyncio.wait_for(self._room.wait(), remaining)
            except TimeoutError:
                continue
