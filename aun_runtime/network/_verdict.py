"""How a failed send to the AUN network is judged: wait for the connection, try again, or give up.

The AUN client raises its own error classes (`aun_core.errors`), mapped from the gateway's codes:
a lost or not-yet-ready connection is never a reason to give up on a message; a rate limit, a
recipient with no end-to-end keys published yet or a token being renewed may pass; an answer that
names the message itself as wrong (no such recipient, not a member, not allowed) never will.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Verdict", "describe", "judge"]


class Verdict(Enum):
    """What to do about a send that failed."""

    CONNECTION = "connection"  # wait for the client to be ready, then again, for as long as it takes
    RETRY = "retry"  # again after a pause, up to max_attempts
    REFUSED = "refused"  # never: a dead letter


def judge(exc: BaseException) -> Verdict:
    """Sort a failed send: the connection, something that may pass, or a refusal for good."""
    from aun_core import errors

    if isinstance(exc, errors.ConnectionError | errors.TimeoutError | errors.SessionError | OSError | TimeoutError):
        return Verdict.CONNECTION
    if isinstance(exc, errors.AUNError) and (exc.retryable or isinstance(exc, errors.RateLimitError | errors.E2EEError | errors.AuthError)):
        return Verdict.RETRY  # a rate limit, a recipient with no keys published yet, a token being renewed
    if isinstance(exc, errors.ValidationError | errors.PermissionError | errors.GroupError | errors.NotFoundError):
        return Verdict.REFUSED
    return Verdict.RETRY


def describe(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    return f"{type(exc).__name__}{f' {code}' if code not in (None, -1) else ''}: {exc}"
