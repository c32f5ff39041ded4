"""Errors of the distributed runtime. All derive from `protocols.errors.AUNError`."""

from __future__ import annotations

from protocols.errors import AUNError

__all__ = ["HostStateError", "HostUnavailableError", "WorkerIdentityError"]


class HostStateError(AUNError):
    """The host's state file cannot be used: another running host holds it, it is not a state file
    of this version, or it cannot be written."""


class HostUnavailableError(AUNError):
    """The host cannot be reached now; the worker keeps reconnecting in the background."""


class WorkerIdentityError(AUNError):
    """The host does not accept this worker's name with its secret: another worker is known there
    by that name (its secret is kept beside its archive, in `<archive>.secret`)."""
