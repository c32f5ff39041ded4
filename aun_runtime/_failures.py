"""`FailureLog`: where a runtime records what went wrong, so that nothing fails in silence.

Three kinds of failure are recorded, each archived, counted in [`RuntimeStats`][aun_runtime.RuntimeStats]
and logged:

* a **dead letter**: a message that could not be delivered (unknown AID, no route, unknown group, a
  sender outside the group, a full mailbox) or whose handler raised, with the reason;
* a **loop stop**: a send refused by the loop guard (the thread passed `max_hops`);
* a **budget stop**: a send or a model call refused by a budget.
"""

from __future__ import annotations

import logging
from typing import TypeVar

from protocols.aun import AUNMessage
from protocols.errors import AUNError

from ._archive import Archive, RecordKind
from ._errors import BudgetExceeded, HopLimitExceeded
from ._stats import RuntimeStats

__all__ = ["FailureLog"]

logger = logging.getLogger("aun_runtime")

_ErrorT = TypeVar("_ErrorT", bound=BaseException)


class FailureLog:
    """Records a runtime's dead letters, loop stops and budget stops into its archive and stats."""

    __slots__ = ("archive", "stats")

    def __init__(self, archive: Archive, stats: RuntimeStats) -> None:
        self.archive = archive
        self.stats = stats

    def dead_letter(self, owner: str, message: AUNMessage | None, error: BaseException) -> None:
        """Record that `message` could not be delivered to, or handled by, `owner`."""
        self.stats.dead_letters += 1
        reason = f"{type(error).__name__}: {error}"
        self.archive.record_event(owner, RecordKind.DEAD_LETTER, reason, message)
        if isinstance(error, AUNError):
            logger.warning("dead letter for %s: %s", owner, reason)
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
        logger.warning("loop guard: %s", error)

    def budget_stop(self, owner: str, error: BudgetExceeded, message: AUNMessage | None = None) -> None:
        """Record that a budget stopped `owner`: a send (with the message refused) or a model call."""
        self.stats.budget_stops += 1
        self.archive.record_event(owner, RecordKind.BUDGET_STOP, error.reason, message)
        logger.warning("budget stop for %s: %s", owner, error)
