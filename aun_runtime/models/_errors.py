"""Errors raised by the model clients. All derive from `protocols.errors.AUNError`."""

from __future__ import annotations

from protocols.errors import AUNError

from ..base._errors import TransientError

__all__ = [
    "CassetteFileError",
    "CassetteMissError",
    "ModelAnswerError",
    "ModelConfigError",
    "ModelUnavailableError",
]


class ModelConfigError(AUNError):
    """The model configuration (environment variables or arguments) cannot produce a client."""


class CassetteFileError(ModelConfigError):
    """A cassette file is missing, unreadable, of another format, or has an entry that does not match
    its own key (edited by hand). The message says which file and which entry."""


class CassetteMissError(AUNError):
    """A replaying client was asked something its cassette holds no answer for.

    The message names the request (key, agent, last message), says how the closest recorded request
    differs, and how to record the answer. `key` is the request's content key.
    """

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class ModelUnavailableError(TransientError):
    """A live model gave no answer within the patience of its call: the endpoint kept refusing
    (429, 5xx), timing out or dropping connections. Transient: the turn is tried again under its
    agent's retry policy, then it is a retryable dead letter."""


class ModelAnswerError(TransientError):
    """A live model kept answering something that is not an answer (no `choices`, a body the
    client cannot read) after the answer retries. Each such answer is on the record as a
    `model_anomaly`; the turn is tried again like any transient failure."""
