"""The mailbox: one message at a time per agent, in arrival order, with a bound.

autogen-core starts a task per delivered message, so one agent may run many handlers at once and
finish them out of order. An actor does not: it takes its messages one by one. The mailbox gives
each agent that discipline and puts a bound on how much may wait for it.

A :class:`Mailbox` is the single place where the bound and the overflow policy live, whichever core
carries the messages:

* On a core that drains mailboxes itself (:class:`~aun_runtime.AUNActorRuntime`), the core admits
  each arriving message with :meth:`Mailbox.take_if_room` / :meth:`Mailbox.enter`, runs one message
  at a time, and calls :meth:`Mailbox.release` when it is done.
* On a core that runs a task per message (autogen-core's single-threaded runtime), the runtime facade
  does the same at delivery time with :meth:`Mailbox.arrive`, and :meth:`Mailbox.take_turn` makes
  the handlers take turns.

Occupancy counts every message that is promised to, waiting in, or being handled by the mailbox.
Senders in this process *reserve* a place before they publish a direct message (the send tools do
this), so with the ``block`` policy a fast sender waits for a slow receiver instead of piling
messages up. Room is handed out first come, first served: a sender that arrives while others wait
queues behind them, so waiting never reorders messages.

A message that arrives without a reservation (a group post, a raw autogen-core publish, a message
from another process) is admitted the same way when the core can push back on its publisher: under
``block`` the publisher waits for room, up to ``block_timeout``; after that the message is queued
anyway and counted as ``overflowed``, so that two agents flooding each other cannot deadlock.
A core that cannot push back (a task per message) queues it at once and counts it as ``overflowed``
when the mailbox was full. Under ``dead_letter`` a message that meets a full mailbox is refused and
recorded as a dead letter. Nothing is dropped silently.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable
from enum import StrEnum
from typing import TypeVar

from ._errors import MailboxFullError

__all__ = ["DEFAULT_BLOCK_TIMEOUT", "DEFAULT_MAILBOX_CAPACITY", "Mailbox", "OverflowPolicy"]

#: Messages that may wait for one agent. Large enough to absorb a burst, small enough that a flood
#: against a slow agent is felt by its senders at once rather than after memory has grown.
DEFAULT_MAILBOX_CAPACITY = 1024
#: Seconds a sender waits for room under ``block`` before the message becomes a dead letter (or,
#: for a message without a reservation, is queued over the bound). Long enough for any handler that
#: makes progress; finite so that two full mailboxes waiting on each other (A sends to B while B
#: sends to A) cannot hang a runtime forever.
DEFAULT_BLOCK_TIMEOUT = 30.0

T = TypeVar("T")


class OverflowPolicy(StrEnum):
    """What happens when a message meets a full mailbox."""

    BLOCK = "block"  #: senders wait for room (backpressure); see the module docstring
    DEAD_LETTER = "dead_letter"  #: refused at once and recorded as a dead letter


class Mailbox:
    """The bound, the overflow policy and the turn-taking of one agent.

    Slim on purpose (a runtime may hold one for each of 100,000 idle agents): the reservation table,
    the queue of waiting senders and the queue of turns are created on first use.

    Args:
        capacity: how many messages may be reserved for, waiting in, or handled by this mailbox.
        overflow: the policy when it is full.
        block_timeout: seconds a sender waits for room under ``block``.
    """

    __slots__ = (
        "_busy",
        "_reserved",
        "_turns",
        "_waiters",
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
        overflow: OverflowPolicy | str = OverflowPolicy.BLOCK,
        block_timeout: float = DEFAULT_BLOCK_TIMEOUT,
    ) -> None:
        if capacity < 1:
            raise ValueError("a mailbox needs a capacity of at least 1")
        if block_timeout < 0:
            raise ValueError("block_timeout cannot be negative")
        self.capacity = capacity
        self.overflow = OverflowPolicy(overflow)
        self.block_timeout = block_timeout
        self.occupancy = 0
        self.high_water = 0
        self.overflowed = 0
        self._reserved: dict[str, int] | None = None  # message id -> places promised to it
        self._waiters: deque[asyncio.Future[None]] | None = None  # senders waiting for room, in order
        self._busy = False  # a message is being handled (on a core that runs a task per message)
        self._turns: deque[asyncio.Future[None]] | None = None  # messages waiting for their turn

    @property
    def full(self) -> bool:
        return self.occupancy >= self.capacity

    @property
    def waiting_senders(self) -> int:
        """Senders waiting for room right now."""
        return len(self._waiters) if self._waiters else 0

    # -- before publishing -------------------------------------------------------------------------

    def try_reserve(self, message_id: str) -> bool:
        """Reserve a place if one is free right now (the common case, without a coroutine)."""
        if not self._has_room():
            return False
        self._take()
        self._note_reservation(message_id)
        return True

    async def reserve(self, message_id: str) -> None:
        """Promise a place to a message about to be published.

        Raises:
            MailboxFullError: the mailbox is full and the policy is ``dead_letter``, or it stayed
                full for ``block_timeout`` seconds.
        """
        if not self._has_room():
            if self.overflow is OverflowPolicy.DEAD_LETTER:
                raise MailboxFullError(f"mailbox full ({self.capacity} messages)")
            await self._wait_for_room()  # the place is ours when this returns
        else:
            self._take()
        self._note_reservation(message_id)

    def _note_reservation(self, message_id: str) -> None:
        reserved = self._reserved
        if reserved is None:
            self._reserved = {message_id: 1}
        else:
            reserved[message_id] = reserved.get(message_id, 0) + 1

    def cancel_reservation(self, message_id: str) -> None:
        """Give back a place reserved for a message that was not published after all."""
        if self._consume_reservation(message_id):
            self.release()

    # -- on arrival --------------------------------------------------------------------------------

    def take_if_room(self, message_id: str) -> bool:
        """Admit an arriving message without waiting, if it can be: it holds a reservation, or there
        is room and nobody is waiting for it. False means: wait with :meth:`enter`, or refuse."""
        if self._reserved is not None and self._consume_reservation(message_id):
            return True
        if self.occupancy < self.capacity and not self._waiters:
            self._take()
            return True
        return False

    async def enter(self, message_id: str) -> bool:
        """Admit an arriving message that :meth:`take_if_room` could not: the publisher waits.

        Returns:
            True once the message has its place. Under ``block`` that is after room came (first
            come, first served) or, after ``block_timeout``, over the bound (counted in
            ``overflowed``). False under ``dead_letter``: refuse it and record a dead letter.
        """
        if self.take_if_room(message_id):
            return True
        if self.overflow is OverflowPolicy.DEAD_LETTER:
            return False
        try:
            await self._wait_for_room()
        except MailboxFullError:
            self.overflowed += 1
            self._take()
        return True

    def arrive(self, message_id: str) -> bool:
        """Admit a message at once, for a core that cannot make its publisher wait.

        Returns:
            False: refuse it (full, ``dead_letter`` policy). Under ``block`` a message without a
            reservation that finds the mailbox full is queued anyway and counted in ``overflowed``.
        """
        if self._reserved is not None and self._consume_reservation(message_id):
            return True
        if self.occupancy >= self.capacity:
            if self.overflow is OverflowPolicy.DEAD_LETTER:
                return False
            self.overflowed += 1
        self._take()
        return True

    # -- handling ----------------------------------------------------------------------------------

    async def take_turn(self, handle: Awaitable[T]) -> T:
        """Await ``handle`` when every message that arrived before has been handled.

        Only needed on a core that runs a task per message; a draining core takes turns by itself.
        The turn passes straight to the next waiter, so no later arrival can overtake an earlier one.
        """
        if self._busy:
            turn = asyncio.get_running_loop().create_future()
            if self._turns is None:
                self._turns = deque()
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
        self._turns = None
        self._busy = False

    def release(self) -> None:
        """A message is done (handled, filtered or failed): free its place, or hand it to the first
        sender waiting for one."""
        self.occupancy -= 1
        if self._waiters is not None:
            self._hand_out()

    # -- internals ---------------------------------------------------------------------------------

    def _has_room(self) -> bool:
        return self.occupancy < self.capacity and not self._waiters

    def _take(self) -> None:
        self.occupancy += 1
        if self.occupancy > self.high_water:
            self.high_water = self.occupancy

    def _consume_reservation(self, message_id: str) -> bool:
        reserved = self._reserved
        if not reserved:
            return False
        count = reserved.get(message_id)
        if not count:
            return False
        if count == 1:
            del reserved[message_id]
            if not reserved:
                self._reserved = None
        else:
            reserved[message_id] = count - 1
        return True

    async def _wait_for_room(self) -> None:
        """Queue for a place; it is taken on our behalf by :meth:`release` before we wake up."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        if self._waiters is None:
            self._waiters = deque()
        self._waiters.append(waiter)
        self._hand_out()  # room may have come back while nobody was waiting for it
        timer = loop.call_later(self.block_timeout, _expire, waiter)
        try:
            await waiter
        except MailboxFullError:
            self._forget(waiter)
            raise MailboxFullError(
                f"mailbox stayed full ({self.capacity} messages) for {self.block_timeout:g} s"
            ) from None
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release()  # a place was handed to us just as we were cancelled: give it back
            else:
                self._forget(waiter)
            raise
        finally:
            timer.cancel()

    def _hand_out(self) -> None:
        waiters = self._waiters
        while waiters and self.occupancy < self.capacity:
            waiter = waiters.popleft()
            if not waiter.done():
                self._take()  # handed over: nobody can slip in between release and the waiter's wake-up
                waiter.set_result(None)
        if not waiters:
            self._waiters = None

    def _forget(self, waiter: asyncio.Future[None]) -> None:
        waiters = self._waiters
        if waiters is not None:
            with contextlib.suppress(ValueError):  # already handed a place and popped
                waiters.remove(waiter)
            self._hand_out()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(MailboxFullError("mailbox stayed full"))
