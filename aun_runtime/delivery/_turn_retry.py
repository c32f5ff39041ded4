"""`TurnRetry`: a turn that failed for a passing cause is tried again, holding the agent's mailbox.

A turn that ends with a [`TransientError`][aun_runtime.TransientError] (its model rate-limited or
down past the call's patience, or answering nonsense) is tried again, up to `tries` in all, after
`backoff` seconds, doubled per try, at most `max_backoff`. After the last try its message is a dead
letter **marked retryable** (its reason begins `retryable: `), with its cause: it can be redriven
later.

**The retry holds the mailbox.** The agent's next message waits until this one is handled or given
up: an agent's messages are handled in the order they arrived, and an answer that overtook the
question before it would read as an answer to the wrong thing. The cost is that the agent answers
nothing else meanwhile; since the cause is usually its model being unavailable, the next message
would meet the same endpoint anyway. Each try is a turn of its own, under the handler timeout.

**A retry does not send twice.** An agent with a retry policy gives each send of a handler turn a
message id derived from the message it answers and its place in the turn (the first send, the
second ...); a second try that sends the same things sends the same ids, which every receiver's
channel drops as duplicates. An agent without a policy (`turn_retry = None`) keeps fresh ids.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from protocols.aun import AUNMessage

from ..base._errors import RuntimeStoppedError, TransientError

__all__ = ["DEFAULT_TURN_RETRY", "RETRYABLE", "TurnRetry", "derived_message_id", "is_retryable"]

#: How the reason of a dead letter that may be redriven begins.
RETRYABLE = "retryable: "


@dataclass(frozen=True)
class TurnRetry:
    """How often, and how far apart, a turn that failed for a passing cause is tried.

    Attributes:
        tries: tries in all (1: never again).
        backoff: seconds before the second try; doubled before each further one.
        max_backoff: the longest wait between two tries.
    """

    tries: int = 3
    backoff: float = 5.0
    max_backoff: float = 60.0

    def __post_init__(self) -> None:
        if self.tries < 1:
            raise ValueError(f"a TurnRetry makes at least one try (got tries={self.tries!r})")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ValueError("a TurnRetry's backoff and max_backoff are seconds, not negative")

    def delay(self, tried: int) -> float:
        """Seconds to wait after try number `tried` (1 is the first) failed."""
        return min(self.max_backoff, self.backoff * 2.0 ** min(tried - 1, 30))


#: The policy of the model-backed agents: three tries, five and ten seconds apart. Each try already
#: waited out its model's storm for up to the call's patience (AUN_MODEL_PATIENCE), so a turn that
#: still fails meets an outage longer than minutes, which a dead letter and a redrive serve better
#: than a mailbox held for longer.
DEFAULT_TURN_RETRY = TurnRetry()


def is_retryable(error: BaseException) -> bool:
    """May a dead letter of this cause be delivered again later? A transient failure, or a runtime
    that stopped before (or while) the message was handled."""
    return isinstance(error, TransientError | RuntimeStoppedError)


def derived_message_id(sender: str, answering: AUNMessage, place: int) -> str:
    """The id of the `place`-th send (0: the first) of `sender`'s turn on `answering`: the same on
    every try, and another for each agent that answers (every member of a group gets one message)."""
    digest = hashlib.sha256(f"{sender}\n{answering.from_aid}\n{answering.message_id}".encode()).hexdigest()[:24]
    return f"re-{digest}-{place}"
