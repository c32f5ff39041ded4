"""`FailureLog`: where a runtime records what went wrong, so that nothing fails in silence.

Four kinds of failure are recorded, each archived, counted in [`RuntimeStats`][aun_runtime.RuntimeStats]
and logged:

* a **dead letter**: a message that could not be delivered (unknown AID, no route, unknown group, a
  sender outside the group, a full mailbox) or whose handler raised, with the reason;
* a **loop stop**: a send refused by the loop guard (the thread passed `max_hops`);
* a **budget stop**: a send or a model call refused by a budget;
* a **model anomaly**: a model answered something that is not an answer (no choices, neither text
  nor tool calls, tool arguments that do not parse, a tool that does not exist).

A handler that times out is a dead letter whose reason is a `HandlerTimeoutError`;
it is counted in `handler_timeouts` as well.

**One line per kind per turn.** Every failure is archived with its detail, but the log gets the
first of a kind in a turn (a dead letter of one error class, a loop stop, a budget stop, by the
agent they stop) and, when the turn ends, one line with how many there were: a model agent told to
spam sends hundreds of refused sends in one turn, and the log shows two lines. Failures outside
any turn (application code) are logged one by one.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from protocols.aun import AUNMessage
from protocols.errors import AUNError

from ..base._errors import BudgetExceeded, HandlerTimeoutError, HopLimitExceeded
from ..base._stats import RuntimeStats
from ..storage._archive import Archive, RecordKind
from ._turn_retry import RETRYABLE, is_retryable
from ._turns import Turn, TurnWatch

__all__ = ["FailureLog"]

logger = logging.getLogger("aun_runtime")

_ErrorT = TypeVar("_ErrorT", bound=BaseException)


class FailureLog:
    """Records a runtime's dead letters, loop stops and budget stops into its archive and stats.

    Args:
        archive: where each failure is archived with its reason.
        stats: the counters.
        turns: the runtime's turns, to log repeated failures of one turn once (None: log each).
    """

    __slots__ = ("archive", "stats", "turns")

    def __init__(self, archive: Archive, stats: RuntimeStats, turns: TurnWatch | None = None) -> None:
        self.archive = archive
        self.stats = stats
        self.turns = turns

    def dead_letter(self, owner: str, message: AUNMessage | None, error: BaseException) -> None:
        """Record that `message` could not be delivered to, or handled by, `owner`."""
        stats = self.stats
        stats.dead_letters += 1
        if isinstance(error, HandlerTimeoutError):
            stats.handler_timeouts += 1
        kind = type(error).__name__
        stats.dead_letter_reasons[kind] = stats.dead_letter_reasons.get(kind, 0) + 1
        reason = f"{kind}: {error}"
        if is_retryable(error):
            reason = RETRYABLE + reason  # what `dead-letters retry` and `redrive` look for
        self.archive.record_event(owner, RecordKind.DEAD_LETTER, reason, message)
        if isinstance(error, AUNError):
            self._warn(("dead letter", owner, type(error).__name__), f"dead letter for {owner}: {reason}")
        else:
            logger.error("dead letter for %s: handler raised %s", owner, reason, exc_info=error)

    def refused(self, message: AUNMessage, error: _ErrorT) -> _ErrorT:
        """Record `message` as its sender's dead letter; return `error` for the sender to raise."""
        self.dead_letter(message.from_aid, message, error)
        return error

    def loop_stop(self, sender: str, error: HopLimitExceeded, message: AUNMessage) -> None:
        """Record a send the loop guard refused."""
        self.stats.loop_stops += 1
        self.archive.record_event(sender, RecordKind.LOOP_STOP, str(error), message)
        self._warn(("loop stop", sender), f"loop guard: {error}")

    def budget_stop(self, owner: str, error: BudgetExceeded, message: AUNMessage | None = None) -> None:
        """Record that a budget stopped `owner`: a send (with the message refused) or a model call."""
        self.stats.budget_stops += 1
        self.archive.record_event(owner, RecordKind.BUDGET_STOP, error.reason, message)
        self._warn(("budget stop", owner), f"budget stop for {owner}: {error}")

    def model_anomaly(self, owner: str, detail: str, message: AUNMessage | None = None) -> None:
        """Record that the model of `owner` answered something that is not an answer (`detail`),
        while `owner` handled `message`."""
        self.stats.model_anomalies += 1
        self.archive.record_event(owner, RecordKind.MODEL_ANOMALY, detail, message)
        self._warn(("model anomaly", owner), f"model anomaly for {owner}: {detail}")

    def _warn(self, key: tuple[Any, ...], line: str) -> None:
        turn = self.turns.current() if self.turns is not None else None
        if turn is None:
            logger.warning("%s", line)
            return
        repeats = turn.repeats
        if repeats is None:
            turn.repeats = repeats = {}
        seen = repeats.get(key)
        if seen is None:
            repeats[key] = [1, line]
            logger.warning("%s", line)  # the first of its kind in this turn: at once
        else:
            seen[0] += 1

    def summarise(self, turn: Turn) -> None:
        """A turn that repeated a warning has ended: one line per kind, with the count."""
        for (kind, *_), (count, first) in (turn.repeats or {}).items():
            if count > 1:
                logger.warning(
                    "%s of %s: %d %ss in this turn, logged once (each is in the archive); the first: %s",
                    turn.what, turn.aid, count, kind, first,
                )
