"""AUN identifiers: what an AID, a group id and a message id may be, and fresh message ids.

Pure checks and one id generator, apart from the message model so that the envelope reads as
fields; [`protocols.aun`][protocols.aun] exports the public names.
"""

from __future__ import annotations

import itertools
import re
import secrets
from typing import Annotated

from pydantic import AfterValidator

from .errors import InvalidAIDError, InvalidGroupIdError, InvalidMessageError

__all__ = [
    "AID",
    "AID_PATTERN",
    "GROUP_ID_PATTERN",
    "MAX_AID_LENGTH",
    "GroupId",
    "aid_domain",
    "is_aid",
    "is_text",
    "new_message_id",
    "validate_aid",
    "validate_group_id",
    "validate_message_id",
]

#: A DNS name is at most 253 characters; an AID is a DNS-shaped name.
MAX_AID_LENGTH = 253
#: ``name.domain``: lowercase labels of letters, digits, ``-`` and ``_`` (the name may use ``_``).
AID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]*(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+$")
GROUP_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")
_MAX_GROUP_ID_LENGTH = 128


def validate_message_id(message_id: str) -> str:
    """Return `message_id` if it can be a message's id, else raise `InvalidMessageError`.

    An id is 1 to 128 characters of text that UTF-8 can carry (no lone surrogate).

    Example:
        >>> validate_message_id("task-42")
        'task-42'
    """
    if not isinstance(message_id, str) or not 0 < len(message_id) <= 128:
        got = f"{len(message_id)} characters" if isinstance(message_id, str) else type(message_id).__name__
        raise InvalidMessageError(f"invalid message: message_id: 1 to 128 characters of text, not {got}", field="message_id")
    if not is_text(message_id):
        raise InvalidMessageError(
            "invalid message: message_id: text that is not valid Unicode (a lone surrogate)", field="message_id"
        )
    return message_id


def validate_aid(aid: str) -> str:
    """Return `aid` if it is a valid AID, else raise `InvalidAIDError` saying why.

    Example:
        >>> validate_aid("coder.local")
        'coder.local'
    """
    if not isinstance(aid, str):
        raise InvalidAIDError(f"an AID is a string like 'coder.local', not {type(aid).__name__}")
    if len(aid) > MAX_AID_LENGTH:
        raise InvalidAIDError(f"AID is {len(aid)} characters long; the limit is {MAX_AID_LENGTH}")
    if AID_PATTERN.match(aid):
        return aid
    if aid.lower() != aid and AID_PATTERN.match(aid.lower()):
        raise InvalidAIDError(f"AIDs are lowercase: use {aid.lower()!r} instead of {aid!r}")
    if "." not in aid:
        # The example must itself be a valid AID, or following the advice only meets the next error.
        example = f"{aid.lower()}.local"
        hint = f", e.g. {example!r}" if AID_PATTERN.match(example) else ""
        raise InvalidAIDError(f"AID {aid!r} has no domain: write it as 'name.domain' in lowercase{hint}")
    raise InvalidAIDError(
        f"AID {aid!r} is not of the form 'name.domain' (lowercase letters, digits, '-' and '_', "
        "labels separated by dots)"
    )


def aid_domain(aid: str) -> str:
    """The domain of an AID: everything after its first dot (`coder.local` -> `local`)."""
    return aid.split(".", 1)[1]


def validate_group_id(group_id: str) -> str:
    """Return `group_id` if it can name a group (and a topic), else raise `InvalidGroupIdError`."""
    if not isinstance(group_id, str) or not GROUP_ID_PATTERN.match(group_id):
        raise InvalidGroupIdError(
            f"group id {group_id!r} must be 1-{_MAX_GROUP_ID_LENGTH} lowercase letters, digits, '.', '-' "
            "or '_', starting with a letter or digit"
        )
    return group_id


def new_message_id() -> str:
    """A fresh, globally unique message id: 32 hex digits, like a UUID.

    A random 64-bit prefix drawn once per process, then a counter: unique across processes (a prefix
    collision is a 1 in 2**64 event), and an order of magnitude cheaper than asking the OS for 16
    random bytes per message.
    """
    return f"{_ID_PREFIX}{next(_ID_COUNTER):016x}"


_ID_PREFIX = secrets.token_hex(8)
_ID_COUNTER = itertools.count(1)



AID = Annotated[str, AfterValidator(validate_aid)]
GroupId = Annotated[str, AfterValidator(validate_group_id)]

#: AIDs recently found valid. The same few senders and recipients recur in message after message;
#: a set lookup is a fraction of a pattern match. Cleared when full (the cost is a re-match).
_KNOWN_AIDS: set[str] = set()
_KNOWN_AIDS_LIMIT = 4096


def is_aid(value: object) -> bool:
    if type(value) is not str:
        return False
    if value in _KNOWN_AIDS:
        return True
    if len(value) <= MAX_AID_LENGTH and AID_PATTERN.match(value) is not None:
        if len(_KNOWN_AIDS) >= _KNOWN_AIDS_LIMIT:
            _KNOWN_AIDS.clear()
        _KNOWN_AIDS.add(value)
        return True
    return False


def is_text(value: str | None) -> bool:
    """Whether `value` can be written as UTF-8, as JSON on the wire and in the archive must be.

    A Python string can hold what UTF-8 cannot: a lone surrogate (`"\\ud800"`, which a JSON
    escape can also produce). Such a message would fail at every write, so it is refused where
    it is made. ASCII, the usual case, is told apart without encoding anything.
    """
    if value is None or value.isascii():
        return True
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True
