"""Errors of the distributed runtime. All derive from `protocols.errors.AUNError`."""

from __future__ import annotations

from protocols.errors import AUNError

from ..base._errors import ConfigurationError

__all__ = ["HostStateError", "HostUnavailableError", "WorkerIdentityError"]


class HostStateError(ConfigurationError):
    """The host's state file cannot be used: another running host holds it, it is no regular file of
    at most `MAX_STATE_BYTES`, it is not a state file of this version, or it cannot be written. At
    start, a configuration error (exit 2 on the command line)."""


class HostUnavailableError(AUNError):
    """The host cannot be reached now; the worker keeps reconnecting in the background."""


class WorkerIdentityError(ConfigurationError):
    """The host does not accept this worker's name with its secret: another worker is known there
    by that name (its secret is kept beside its archive, in `<archive>.secret`)."""
