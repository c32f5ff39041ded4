"""Errors of the distributed runtime. All derive from :class:`protocols.errors.AUNError`."""

from __future__ import annotations

from protocols.errors import AUNError

from .._errors import UndeliverableError

__all__ = ["HostUnavailableError", "OutboxFullError"]


class HostUnavailableError(AUNError):
    """The host cannot be reached now; the worker keeps reconnecting in the background."""


class OutboxFullError(UndeliverableError):
    """The worker already keeps as many unacknowledged messages as its outbox allows."""
