"""Errors raised by the model clients. All derive from `protocols.errors.AUNError`."""

from __future__ import annotations

from protocols.errors import AUNError

__all__ = ["CassetteFileError", "CassetteMissError", "ModelConfigError"]


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
