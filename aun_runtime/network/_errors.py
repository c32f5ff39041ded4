"""Errors of the gateway agent and its links to the AUN network. All derive from
`protocols.errors.AUNError`; those that refuse one message also from
[`UndeliverableError`][aun_runtime.UndeliverableError], so the runtime records a dead letter.

The outbox keeps its own two (`OutboxFullError`, `OutboxWriteError`) beside the store they
describe, in `._outbox`.
"""

from __future__ import annotations

from protocols.errors import AUNError

from ..base._errors import UndeliverableError

__all__ = [
    "GatewayAgentError",
    "IdentityError",
    "NetworkClientMissingError",
    "NetworkRefusedError",
    "NotExposedError",
]


class GatewayAgentError(AUNError):
    """The gateway agent was misused (not started, an AID it cannot expose...)."""


class NotExposedError(UndeliverableError):
    """The sender has no AUN identity here, so nothing it sends can leave for the network."""


class NetworkClientMissingError(AUNError):
    """The AUN client library is not installed.

    Args:
        package: the pinned client's requirement, named in the message.
    """

    def __init__(self, package: str) -> None:
        super().__init__(f"the gateway agent needs the AUN client: pip install 'aun-runtime[gateway]' (or {package})")


class IdentityError(AUNError):
    """An exposed AID could not get its AUN identity (registration refused or failed)."""

    def __init__(self, aid: str, reason: str, *, retryable: bool) -> None:
        super().__init__(f"{aid}: no AUN identity: {reason}")
        self.aid = aid
        self.retryable = retryable


class NetworkRefusedError(UndeliverableError):
    """The AUN network refused a message for good (unknown recipient, not a group member...), or
    kept failing it for a reason other than the connection; it was recorded as a dead letter."""
