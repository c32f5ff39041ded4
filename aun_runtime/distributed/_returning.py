"""Plain autogen-ext publishes a worker waits for: those its own agents subscribe to.

A publish on a topic that is not an AUN inbox goes to the host, which sends one copy to every
worker with a subscriber, this one included; autogen-ext counts none of it. So autogen-core code
that publishes and then calls `stop_when_idle` on a worker would stop before its own agents had
the message. The worker notes each such publish that one of its own agents subscribes to, and
`idle` waits until its copy has come back and been
handled. What other workers' agents do with their copies is theirs to settle, as for AUN messages.

A plain publish is best effort (autogen-ext's): one that never comes back (the link dropped, or the
host refused it) is waited for at most `RETURN_TIMEOUT` seconds, then given up on and logged.
"""

from __future__ import annotations

import logging
from collections import Counter

__all__ = ["RETURN_TIMEOUT", "ReturningPublishes"]

logger = logging.getLogger("aun_runtime.distributed")

#: Seconds ``idle`` waits for a plain publish to come back from the host. The round trip takes
#: well under a millisecond (a host at full load: seconds); 30 s is long enough for any host that
#: is there at all, and short enough that a publish the host refused or lost does not hold idle.
RETURN_TIMEOUT = 30.0


class ReturningPublishes:
    """The plain publishes on their way back to this worker, by message id, with when they were sent."""

    def __init__(self) -> None:
        self._pending: Counter[str] = Counter()
        self._sent_at: dict[str, float] = {}

    def __bool__(self) -> bool:
        return bool(self._pending)

    def sent(self, message_id: str, now: float) -> None:
        self._pending[message_id] += 1
        self._sent_at.setdefault(message_id, now)

    def returned(self, message_id: str) -> None:
        """Its copy came back and was handled (or failed)."""
        if message_id not in self._pending:
            return  # given up on already, or published by another worker
        self._pending[message_id] -= 1
        if not self._pending[message_id]:
            del self._pending[message_id]
            del self._sent_at[message_id]

    def expire(self, now: float) -> int:
        """Give up on what was sent more than `RETURN_TIMEOUT` seconds ago; how many."""
        late = [message_id for message_id, sent in self._sent_at.items() if now - sent > RETURN_TIMEOUT]
        for message_id in late:
            del self._sent_at[message_id]
            del self._pending[message_id]
        if late:
            logger.warning(
                "%d plain publishes did not come back from the host within %g s; idle no longer waits for them",
                len(late), RETURN_TIMEOUT,
            )
        return len(late)

    def lost(self) -> int:
        """The link dropped: nothing on it will come back (a plain publish is best effort)."""
        count = len(self._pending)
        self._pending.clear()
        self._sent_at.clear()
        return count
