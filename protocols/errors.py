"""Errors raised by the behaviour contracts.

Every error the project raises derives from `AUNError`, so a caller can catch the whole family
in one `except` clause. The runtime adds its own subclasses in `aun_runtime`; the ones here are the
errors a contract can raise on its own, with no runtime involved: invalid identifiers, invalid or
oversize messages, and contract classes whose wire names collide.

Each error carries a message that says what to do about it.
"""

from __future__ import annotations

__all__ = [
    "AUNError",
    "ContractNameCollisionError",
    "InvalidAIDError",
    "InvalidGroupIdError",
    "InvalidMessageError",
    "PayloadTooLargeError",
]


class AUNError(Exception):
    """Base class of every error raised by aun-runtime and its contracts."""


class InvalidAIDError(AUNError):
    """An agent identifier (AID) is not of the form `name.domain` in lowercase."""


class InvalidGroupIdError(AUNError):
    """A group identifier is empty, too long or has characters a topic name cannot carry."""


class InvalidMessageError(AUNError):
    """A message or payload does not satisfy the AUN message contract.

    `field` names the offending field (dotted path) when one can be named.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class PayloadTooLargeError(InvalidMessageError):
    """A payload's JSON encoding exceeds the AUN frame limit (`protocols.aun.MAX_PAYLOAD_BYTES`)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"payload is {size} bytes of JSON, over the {limit}-byte AUN frame limit; "
            "send large content as a file or link payload, or split it into several messages",
            field="payload",
        )
        self.size = size
        self.limit = limit


class ContractNameCollisionError(AUNError, TypeError):
    """Two contract classes claim the same wire name (they would be confused on the wire)."""
