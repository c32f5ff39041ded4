"""`TurnWatch`: every turn of a runtime's agents, bounded in time, and held back while it stops.

A *turn* is one run of an agent's handler on one message, or one run of a proactive action
(`on_start`, one run of a scheduled action). Every core hands its turns to the agent's dispatch
([`AUNAgent._dispatch`][aun_runtime.AUNAgent]), which begins and ends each one here, so the
rules below hold alike on the actor core, autogen-core's single-threaded core and a distributed worker.

* **A stuck turn is bounded.** A turn runs under its agent's `handler_timeout`
  (`DEFAULT_HANDLER_TIMEOUT` unless the runtime or the registration says otherwise; None is no
  limit). Past it, the turn's task is cancelled inside the handler and the turn ends with a
  `HandlerTimeoutError`, which names the timeout and how long the turn ran: its
  message becomes a dead letter and the agent takes its next one. One timer per runtime, set for the
  earliest deadline, watches every turn: a turn costs a clock read and two dict operations, where a
  timer of its own (`asyncio.timeout`) would cost a timer handle per message on the delivery path.
  Nor does a turn cost an object of its own: a turn that ends as it should (not cut off, nothing to
  summarise) leaves its `Turn` to the next one, so a drain that takes message after message reuses
  one object for all of them.
  A handler that catches the cancellation and carries on cannot be cut off (asyncio cancels, it
  cannot kill); one that blocks the event loop without awaiting cannot be either.
* **Stopping.** [`close`][aun_runtime.Inbox.close] holds back every turn not yet begun (a message whose turn comes waits
  in `held` instead, and a scheduled action does not run); [`wait`][aun_runtime.gateway.GatewayEvents.wait] gives the turns in
  flight a grace to end; `cut_all` cancels what is still running, each turn ending with the
  error it is given; [`release`][aun_runtime.Mailbox.release] fails the held messages once the core has stopped.
* **Whose turn is it.** `current` is the turn running in this task, which is how repeated
  warnings of one turn are summarised (see `aun_runtime.delivery._failures`).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from ..base._errors import HandlerTimeoutError, RuntimeStoppedError
from ..base._histogram import DurationHistogram
from ._turn_spans import TurnSpans, turn_spans

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.trace import Span

    from protocols.aun import AUNMessage

__all__ = ["DEFAULT_HANDLER_TIMEOUT", "RUNTIME_DEFAULT", "RuntimeDefault", "Turn", "TurnWatch"]

logger = logging.getLogger("aun_runtime")

#: Seconds one turn may run before it is cut off. A model agent's turn is a few model calls (each
#: bounded by the model client's own timeout) and local tool calls (each bounded by the agent's
#: tool timeout); on a real model it takes seconds to a minute or two. Five minutes leaves room for a
#: slow model and a few slow tools, and still frees an agent whose handler waits for something that
#: never comes well before anyone would have to find it by hand.
DEFAULT_HANDLER_TIMEOUT = 300.0

_NEVER = math.inf


class _Default(enum.Enum):
    RUNTIME = "the runtime's"

    def __repr__(self) -> str:
        return "RUNTIME_DEFAULT"


#: ``register_agent(..., handler_timeout=RUNTIME_DEFAULT)``, the default: the runtime's own value
#: (``None`` is taken: it means no limit).
RUNTIME_DEFAULT: Final = _Default.RUNTIME
RuntimeDefault: TypeAlias = Literal[_Default.RUNTIME]


class Turn:
    """One turn in flight: whose, on what, since when, and how it was cut off if it was."""

    __slots__ = ("aid", "attempt", "cancelled", "cause", "deadline", "message", "outer", "prior", "repeats",
                 "sends", "settled", "span", "span_token", "started", "task", "timeout", "waiting", "waiting_since",
                 "what")

    # Set only while tracing (by `TurnSpans.begin`): an untraced turn pays nothing for them.
    span: Span | None
    span_token: Token[Context]

    def __init__(
        self,
        task: asyncio.Task[Any],
        aid: str,
        what: str,
        message: AUNMessage | None,
        started: float,
        timeout: float | None,
        outer: Turn | None,
    ) -> None:
        self.task = task
        self.aid = aid
        #: "the handler" or "a proactive action": how the timeout's error names the turn.
        self.what = what
        self.message = message
        self.started = started
        self.timeout = timeout
        self.deadline = _NEVER if timeout is None else started + timeout
        #: The turn this one runs inside, in the same task (``on_start`` of an agent registered by a handler).
        self.outer = outer
        #: The error the turn ends with, once the watch has cancelled it (None: not cut off).
        self.cause: BaseException | None = None
        self.cancelled = False
        self.settled = False  # the watch's cancellation has been taken back (uncancel)
        self.prior = 0  # the task's cancellation count before the watch cancelled it
        #: Warnings of one kind this turn repeated: {key: [count, first line]} (see FailureLog).
        self.repeats: dict[Any, list[Any]] | None = None
        #: What the turn waits for now (`model`, `model limiter`, `tool`), and since when (loop time).
        self.waiting: str | None = None
        self.waiting_since = started
        #: Which try of its message this turn is (1: the first; see TurnRetry).
        self.attempt = 1
        #: Sends made so far in this turn: the place of the next one, for its derived message id.
        self.sends = 0

    def wait_for(self, what: str | None) -> None:
        """Show what the turn waits for from now (None: it is working)."""
        self.waiting = what
        self.waiting_since = asyncio.get_running_loop().time()


class TurnWatch:
    """The turns in flight of one runtime: their timeouts, and the hold while the runtime stops.

    Args:
        on_end: called with each turn that ends having repeated a warning (to summarise it).
    """

    def __init__(self, on_end: Callable[[Turn], None] | None = None) -> None:
        self._turns: dict[asyncio.Task[Any], Turn] = {}  # the innermost turn of each task
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = _NEVER
        self._on_end = on_end
        self._spare: Turn | None = None  # the last turn that ended plainly: the next one reuses it
        self._idle: asyncio.Event | None = None  # set when the last turn ends, while someone waits
        self._released: asyncio.Event | None = None  # set once held messages are to fail
        #: True while the runtime stops: no new turn begins.
        self.closing = False
        #: How long turns take, once something reads it (`/metrics`); None: not measured.
        self.durations: DurationHistogram | None = None
        #: A span per turn, when tracing is on (see `aun_runtime.delivery._turn_spans`); None: off.
        self.spans: TurnSpans | None = turn_spans()

    # -- one turn ------------------------------------------------------------------------------

    def begin(self, aid: str, message: AUNMessage | None, timeout: float | None, what: str = "the handler") -> Turn:
        """A turn of `aid` begins in this task; end it with `end` whatever happens."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        assert task is not None  # every core runs handlers in tasks
        turns = self._turns
        turn = self._spare
        if turn is None:
            turn = Turn(task, aid, what, message, loop.time(), timeout, turns.get(task))
        else:  # as Turn() would make it (an ended plain turn has cause, flags and repeats unset)
            self._spare = None
            turn.task, turn.aid, turn.what, turn.message = task, aid, what, message
            turn.started = started = loop.time()
            turn.timeout = timeout
            turn.deadline = _NEVER if timeout is None else started + timeout
            turn.outer = turns.get(task)
            # What the last turn counted and waited for is its own: a retry's derived ids count from 0.
            turn.attempt, turn.sends, turn.waiting, turn.waiting_since = 1, 0, None, started
        turns[task] = turn
        if turn.deadline < self._timer_at:
            self._arm(loop, turn.deadline)
        if self.spans is not None:
            self.spans.begin(turn)
        return turn

    def cut_off(self, turn: Turn) -> BaseException | None:
        """For a turn's `except CancelledError`: the error the turn ends with when the watch
        cancelled it and nothing else did (the cancellation is taken back), else None: re-raise."""
        if not turn.cancelled or turn.settled:
            return None
        turn.settled = True
        if turn.task.uncancel() > turn.prior:
            return None  # cancelled from outside as well (the runtime stopping): that one goes on
        return turn.cause

    def end(self, turn: Turn) -> None:
        """The turn is over (returned, raised, or cut off)."""
        if self.durations is not None:
            self.durations.observe(time.monotonic() - turn.started)  # loop.time() is the monotonic clock
        if self.spans is not None:
            self.spans.end(turn)
        if turn.outer is None:
            self._turns.pop(turn.task, None)
        else:
            self._turns[turn.task] = turn.outer
        if turn.cancelled and not turn.settled:
            # The handler caught the cancellation and ended another way: its task must not stay
            # marked as cancelled, or the core would take the next message's end for its own stop.
            turn.settled = True
            turn.task.uncancel()
            logger.warning("%s of %s caught the cancellation at its handler_timeout and went on", turn.what, turn.aid)
        if turn.repeats:
            if self._on_end is not None:
                self._on_end(turn)
        elif not turn.cancelled:  # nothing refers to it any more: the next turn may have it
            turn.message = turn.outer = None
            self._spare = turn
        if self._idle is not None and not self._turns:
            self._idle.set()

    def current(self) -> Turn | None:
        """The turn running in this task, if any."""
        task = asyncio.current_task()
        return self._turns.get(task) if task is not None else None

    # -- the timer -----------------------------------------------------------------------------

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = loop.call_at(when, self._expire, loop)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer, self._timer_at = None, _NEVER
        now = loop.time()
        earliest = _NEVER
        for innermost in list(self._turns.values()):
            turn: Turn | None = innermost
            while turn is not None:
                if not turn.cancelled and turn.timeout is not None:
                    if turn.deadline <= now:
                        self._cancel(turn, HandlerTimeoutError(turn.aid, turn.what, now - turn.started, turn.timeout))
                    else:
                        earliest = min(earliest, turn.deadline)
                turn = turn.outer
        if earliest < _NEVER:
            self._arm(loop, earliest)

    @staticmethod
    def _cancel(turn: Turn, cause: BaseException) -> None:
        turn.cause = cause
        turn.cancelled = True
        turn.prior = turn.task.cancelling()
        turn.task.cancel()

    # -- stopping ------------------------------------------------------------------------------

    @property
    def in_flight(self) -> list[Turn]:
        """The turns running now (the innermost of each task)."""
        return list(self._turns.values())

    def close(self) -> None:
        """Begin no new turn: messages whose turn comes wait in `held`."""
        self.closing = True
        self._released = asyncio.Event()

    async def wait(self, grace: float) -> bool:
        """Wait up to `grace` seconds for the turns in flight to end; True if they all did."""
        if not self._turns:
            return True
        self._idle = asyncio.Event()
        try:
            async with asyncio.timeout(grace):
                await self._idle.wait()
        except TimeoutError:
            return not self._turns
        finally:
            self._idle = None
        return True

    def cut_all(self, cause: Callable[[Turn], BaseException]) -> list[Turn]:
        """Cancel every turn still running, each ending with `cause(turn)`; the turns cancelled."""
        cut = [turn for turn in self._turns.values() if not turn.cancelled]
        for turn in cut:
            self._cancel(turn, cause(turn))
        return cut

    async def held(self) -> None:
        """Where a message whose turn comes while the runtime stops waits: the core's stop cancels
        it, or [`release`][aun_runtime.Mailbox.release] fails it.

        Raises:
            RuntimeStoppedError: the runtime stopped before this message's turn.
        """
        released = self._released
        if released is not None:
            await released.wait()
        raise RuntimeStoppedError("the runtime stopped before this message was handled")

    def release(self) -> None:
        """The core has stopped: every held message fails ([`RuntimeStoppedError`][aun_runtime.RuntimeStoppedError])."""
        if self._released is not None:
            self._released.set()

    def reopen(self) -> None:
        """Turns may begin again (the runtime starts again)."""
        self.closing = False
        self._released = None
