"""The mailbox: one message at a time per agent, in arrival order, with a bound.

autogen-core starts a task per delivered message, so one agent may run many handlers at once and
finish them out of order. An actor does not: it takes its messages one by one. The mailbox gives
each agent that discipline and puts a bound on how much may wait for it.

A [`Mailbox`][aun_runtime.Mailbox] is the single place where the bound and the overflow policy live, whichever core
carries the messages:

* On a core that drains mailboxes itself ([`AUNActorRuntime`][aun_runtime.AUNActorRuntime]), the core admits
  each arriving message with [`Mailbox.take_if_room`][aun_runtime.Mailbox.take_if_room] / [`Mailbox.enter`][aun_runtime.Mailbox.enter], runs one message
  at a time, and calls [`Mailbox.release`][aun_runtime.Mailbox.release] when it is done.
* On a core that runs a task per message (autogen-core's single-threaded runtime), the runtime facade
  does the same at delivery time with [`Mailbox.arrive`][aun_runtime.Mailbox.arrive], and [`Mailbox.take_turn`][aun_runtime.Mailbox.take_turn] makes
  the handlers take turns.

Occupancy counts every message that is promised to, waiting in, or being handled by the mailbox.
Senders in this process *reserve* a place before they publish a direct message (the send tools do
this), so with the `block` policy a fast sender waits for a slow receiver instead of piling
messages up. Room is handed out first come, first served: a sender that arrives while others wait
queues behind them, so waiting never reorders messages.

A message that arrives without a reservation (a group post, a raw autogen-core publish, a message
from another process) is admitted the same way when the core can push back on its publisher: under
`block` the publisher waits for room, up to `block_timeout`; after that the message is queued
anyway and counted as `overflowed`, so that two agents flooding each other cannot deadlock.
A core that cannot push back (a task per message) queues it at once and counts it as `overflowed`
when the mailbox was full. Under `dead_letter` a message that meets a full mailbox is refused and
recorded as a dead letter. Nothing is dropped silently.

A mailbox that fills is logged once per *full episode*, not per message. The first sender that has
to wait (or the first message refused or queued over the bound) starts the episode and one warning
on the `aun_runtime` logger, written at the end of that turn of the event loop so that it names
the senders of the same burst:

```text
mailbox of slow.local is full (capacity 4): 5 waiting for room, from a.local, b.local, c.local and 2 more
```

Everything else that meets the full mailbox in that episode is only counted. The episode ends when
occupancy falls to half the capacity (the low-water mark) with nobody waiting, with one info line:

```text
mailbox of slow.local is no longer full, after 2.41 s: 310 waited, 0 refused, 0 queued over the bound
```

and the next fill logs again. Nothing of this runs while there is room.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from ..base._errors import MailboxFullError

__all__ = ["DEFAULT_BLOCK_TIMEOUT", "DEFAULT_MAILBOX_CAPACITY", "Mailbox", "MailboxOptions", "OverflowPolicy"]

#: Messages that may wait for one agent. Large enough to absorb a burst, small enough that a flood
#: against a slow agent is felt by its senders at once rather than after memory has grown.
DEFAULT_MAILBOX_CAPACITY = 1024
#: Seconds a sender waits for room under ``block`` before the message becomes a dead letter (or,
#: for a message without a reservation, is queued over the bound). Long enough for any handler that
#: makes progress; finite so that two full mailboxes waiting on each other (A sends to B while B
#: sends to A) cannot hang a runtime forever.
DEFAULT_BLOCK_TIMEOUT = 30.0

#: Senders named in a full-mailbox warning; the rest are counted ("and 3 more").
NAMED_SENDERS = 3

T = TypeVar("T")

logger = logging.getLogger("aun_runtime")


class OverflowPolicy(StrEnum):
    """What happens when a message meets a full mailbox."""

    BLOCK = "block"  #: senders wait for room (backpressure); see the module docstring
    DEAD_LETTER = "dead_letter"  #: refused at once and recorded as a dead letter


@dataclass(frozen=True)
class MailboxOptions:
    """How every agent's mailbox is made: its bound, its overflow policy and the blocking timeout.

    Given to the runtime (`AUNRuntime(mailbox_capacity=...)`) or to a core that makes mailboxes
    (`AUNActorRuntime(mailbox_capacity=...)`): one of them, never both, so a setting can never be
    silently overruled by the other.
    """

    capacity: int = DEFAULT_MAILBOX_CAPACITY
    overflow: OverflowPolicy = OverflowPolicy.BLOCK
    block_timeout: float = DEFAULT_BLOCK_TIMEOUT

    def __post_init__(self) -> None:
        object.__setattr__(self, "overflow", OverflowPolicy(self.overflow))
        Mailbox(self.capacity, self.overflow, self.block_timeout)  # the same checks as every mailbox

    def mailbox(self, owner: str | None = None) -> Mailbox:
        """A new mailbox with these options, for `owner`."""
        return Mailbox(self.capacity, self.overflow, self.block_timeout, owner=owner)


class Mailbox:
    """The bound, the overflow policy and the turn-taking of one agent.

    Slim on purpose (a runtime may hold one for each of 100,000 idle agents): the reservation table,
    the queue of waiting senders and the queue of turns are created on first use.

    Args:
        capacity: how many messages may be reserved for, waiting in, or handled by this mailbox.
        overflow: the policy when it is full.
        block_timeout: seconds a sender waits for room under `block`.
        owner: the AID (or other name) of the agent it belongs to, for the full-mailbox log lines.
    """

    __slots__ = (
        "_busy",
        "_episode",
        "_reserved",
        "_turns",
        "_waiters",
        "block_timeout",
        "capacity",
        "high_water",
        "occupancy",
        "overflow",
        "overflowed",
        "owner",
    )

    def __init__(
        self,
        capacity: int = DEFAULT_MAILBOX_CAPACITY,
        overflow: OverflowPolicy | str = OverflowPolicy.BLOCK,
        block_timeout: float = DEFAULT_BLOCK_TIMEOUT,
        owner: str | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError("a mailbox needs a capacity of at least 1")
        if block_timeout < 0:
            raise ValueError("block_timeout cannot be negative")
        self.capacity = capacity
        self.overflow = OverflowPolicy(overflow)
        self.block_timeout = block_timeout
        self.owner = owner
        self.occupancy = 0
        self.high_water = 0
        self.overflowed = 0
        self._reserved: dict[str, int] | None = None  # message id -> places promised to it
        self._waiters: deque[asyncio.Future[None]] | None = None  # senders waiting for room, in order
        self._busy = False  # a message is being handled (on a core that runs a task per message)
        self._turns: deque[asyncio.Future[None]] | None = None  # messages waiting for their turn
        # The full episode under way (see the module docstring). Senders wait only during one, so
        # release() needs no other test to know whether anyone waits for the place it frees.
        self._episode: _FullEpisode | None = None

    @property
    def full(self) -> bool:
        return self.occupancy >= self.capacity

    @property
    def at_rest(self) -> bool:
        """Nothing held, promised, waiting or being handled, and no full episode under way: a
        mailbox in this state may be dropped and made again later with only its counts
        (`high_water`, `overflowed`) carried over, and nobody can tell."""
        return (
            self.occupancy == 0
            and self._reserved is None
            and self._waiters is None
            and not self._busy
            and self._turns is None
            and self._episode is None
        )

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

    async def reserve(self, message_id: str, sender: str | None = None) -> None:
        """Promise a place to a message about to be published (by `sender`, if known: it is named
        in the warning when the mailbox is full).

        Raises:
            MailboxFullError: the mailbox is full and the policy is `dead_letter`, or it stayed
                full for `block_timeout` seconds.
        """
        if not self._has_room():
            if self.overflow is OverflowPolicy.DEAD_LETTER:
                self._full_episode(sender).refused += 1
                raise MailboxFullError(f"mailbox full ({self.capacity} messages)")
            try:
                await self._wait_for_room(sender)  # the place is ours when this returns
            except MailboxFullError:
                self._full_episode(None).refused += 1  # the sender gives up: a dead letter
                raise
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
        is room and nobody is waiting for it. False means: wait with [`enter`][aun_runtime.Mailbox.enter], or refuse."""
        if self._reserved is not None and self._consume_reservation(message_id):
            return True
        if self.occupancy < self.capacity and not self._waiters:
            self._take()
            return True
        return False

    async def enter(self, message_id: str, sender: str | None = None) -> bool:
        """Admit an arriving message that [`take_if_room`][aun_runtime.Mailbox.take_if_room] could not: the publisher (`sender`,
        if known, for the full-mailbox warning) waits.

        Returns:
            True once the message has its place. Under `block` that is after room came (first
            come, first served) or, after `block_timeout`, over the bound (counted in
            `overflowed`). False under `dead_letter`: refuse it and record a dead letter.
        """
        if self.take_if_room(message_id):
            return True
        if self.overflow is OverflowPolicy.DEAD_LETTER:
            self._full_episode(sender).refused += 1
            return False
        try:
            await self._wait_for_room(sender)
        except MailboxFullError:
            self.overflowed += 1
            self._full_episode(None).overflowed += 1
            self._take()
        return True

    def arrive(self, message_id: str) -> bool:
        """Admit a message at once, for a core that cannot make its publisher wait.

        Returns:
            False: refuse it (full, `dead_letter` policy). Under `block` a message without a
            reservation that finds the mailbox full is queued anyway and counted in `overflowed`.
        """
        if self._reserved is not None and self._consume_reservation(message_id):
            return True
        if self.occupancy >= self.capacity:
            episode = self._full_episode(None)
            if self.overflow is OverflowPolicy.DEAD_LETTER:
                episode.refused += 1
                return False
            self.overflowed += 1
            episode.overflowed += 1
        self._take()
        return True

    # -- handling ----------------------------------------------------------------------------------

    def begin_turn_now(self) -> bool:
        """Take the turn at once if nobody has it (no coroutine: the usual case); True means the
        caller handles its message now and calls [`end_turn`][aun_runtime.Mailbox.end_turn] after,
        False that it must wait with [`take_turn`][aun_runtime.Mailbox.take_turn]."""
        if self._busy:
            return False
        self._busy = True
        return True

    def end_turn(self) -> None:
        """The turn taken with [`begin_turn_now`][aun_runtime.Mailbox.begin_turn_now] is over: it passes to the next waiter."""
        self._pass_turn()

    async def take_turn(self, handle: Awaitable[T]) -> T:
        """Await `handle` when every message that arrived before has been handled.

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
        if self._episode is not None:  # full lately: someone may wait, or the episode may end
            self._room_freed()

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

    async def _wait_for_room(self, sender: str | None) -> None:
        """Queue for a place; it is taken on our behalf by [`release`][aun_runtime.Mailbox.release] before we wake up."""
        self._full_episode(sender).waited += 1  # before queueing: nobody waits outside an episode
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

    def _room_freed(self) -> None:
        """After a release during a full episode: hand the place on, and end the episode once the
        mailbox has drained to the low-water mark with nobody waiting."""
        if self._waiters is not None:
            self._hand_out()
        # Half the capacity, not "below capacity": under steady backpressure occupancy hovers at the
        # bound, dipping one below it between a release and the next send, and ending there would
        # log a new episode for almost every message. Half-empty means the agent caught up.
        if self._waiters is None and self.occupancy <= self.capacity // 2:
            self._end_episode()

    def _full_episode(self, sender: str | None) -> _FullEpisode:
        """The full episode under way, with `sender` noted; a new one schedules its warning."""
        episode = self._episode
        if episode is None:
            episode = self._episode = _FullEpisode()
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # called outside a loop: nothing else can join this burst
                self._warn(episode)
            else:
                # At the end of this turn of the loop: senders of the same burst are named too.
                episode.warning = loop.call_soon(self._warn, episode)
        if sender is not None:
            episode.senders[sender] = None
        return episode

    def _warn(self, episode: _FullEpisode) -> None:
        episode.warning = None
        if not logger.isEnabledFor(logging.WARNING):
            return
        details = [f"{self.waiting_senders} waiting for room"]
        if episode.senders:
            names = list(episode.senders)
            named = ", ".join(names[:NAMED_SENDERS])
            more = len(names) - NAMED_SENDERS
            details[0] += f", from {named} and {more} more" if more > 0 else f", from {named}"
        if episode.refused:
            details.append(f"{episode.refused} refused")
        if episode.overflowed:
            details.append(f"{episode.overflowed} queued over the bound")
        logger.warning(
            "mailbox of %s is full (capacity %d): %s", self._owner_name(), self.capacity, "; ".join(details)
        )

    def _end_episode(self) -> None:
        episode = self._episode
        if episode is None:
            return
        self._episode = None
        if episode.warning is not None:  # over within one turn of the loop: still said, and first
            episode.warning.cancel()
            self._warn(episode)
        logger.info(
            "mailbox of %s is no longer full, after %.2f s: %d waited, %d refused, %d queued over the bound",
            self._owner_name(),
            time.monotonic() - episode.began,
            episode.waited,
            episode.refused,
            episode.overflowed,
        )

    def _owner_name(self) -> str:
        return self.owner if self.owner is not None else "an unnamed agent"

    def _forget(self, waiter: asyncio.Future[None]) -> None:
        waiters = self._waiters
        if waiters is not None:
            with contextlib.suppress(ValueError):  # already handed a place and popped
                waiters.remove(waiter)
            self._hand_out()


class _FullEpisode:
    """One stretch of time a mailbox was full: when it began and what met it meanwhile."""

    __slots__ = ("began", "overflowed", "refused", "senders", "waited", "warning")

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.waited = 0  # senders (or publishers) that had to wait for room
        self.refused = 0  # refused under ``dead_letter``, or given up after ``block_timeout``
        self.overflowed = 0  # queued over the bound
        self.senders: dict[str, None] = {}  # who waited or was refused, in order, each once
        self.warning: asyncio.Handle | None = None  # the warning, until it is written


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(MailboxFullError("mailbox stayed full"))
