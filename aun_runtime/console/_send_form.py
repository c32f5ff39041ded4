"""Sending as an agent from the console: only when the console was started with `allow_send`.

A send from the page goes through the named agent's own send tools ([`AUNAgent.send`][aun_runtime.AUNAgent.send] and
[`AUNAgent.group_send`][aun_runtime.AUNAgent.group_send]), exactly as if the agent had decided to speak: the same validation,
archive records, loop guard and dead letters. The request is checked field by field first, so a bad
request gets an error that names the field and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocols.aun import AUNMessage, TextPayload, payload_from_json
from protocols.errors import (
    AUNError,
    InvalidAIDError,
    InvalidGroupIdError,
    InvalidMessageError,
    PayloadTooLargeError,
)

from ..api._agent import AUNAgent
from ..api._runtime import AUNRuntime, PayloadLike
from ..base._errors import (
    HopLimitExceeded,
    MailboxFullError,
    NoRouteError,
    NotAGroupMemberError,
    UnknownAIDError,
    UnknownGroupError,
)

__all__ = ["SendRequest", "SendRequestError", "http_status", "parse_send_request", "send_as_agent"]


class SendRequestError(Exception):
    """A send request that cannot be carried out as it is. `field` names the culprit."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class SendRequest:
    """A checked request: who speaks, to whom, what."""

    sender: str
    to: str | None
    group_id: str | None
    payload: PayloadLike
    mentions: tuple[str, ...]
    in_reply_to: str | None


def _optional_str(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise SendRequestError(f"'{name}' must be a string", name)
    return value


def parse_send_request(body: Any) -> SendRequest:
    """Check the JSON body of `POST /api/send`.

    Fields: `from` (required), exactly one of `to` and `group_id`, then either `text` or a
    whole `payload` object; optional `mentions` (AIDs or `"all"`, group messages only) and
    `in_reply_to` (a message id).
    """
    if not isinstance(body, dict):
        raise SendRequestError("the body must be a JSON object")
    sender = _optional_str(body, "from")
    if sender is None:
        raise SendRequestError("'from' is required: the AID of the local agent to send as", "from")
    to, group_id = _optional_str(body, "to"), _optional_str(body, "group_id")
    if (to is None) == (group_id is None):
        raise SendRequestError("give exactly one of 'to' (an AID) and 'group_id'", "to")
    text, raw = body.get("text"), body.get("payload")
    payload: PayloadLike
    if raw is not None:
        if text is not None:
            raise SendRequestError("give 'text' or 'payload', not both", "payload")
        if not isinstance(raw, dict):
            raise SendRequestError("'payload' must be a JSON object with a 'type'", "payload")
        payload = payload_from_json(raw)
    elif isinstance(text, str) and text.strip():
        payload = TextPayload(text=text)
    else:
        raise SendRequestError("'text' is required (a non-empty string), or a whole 'payload'", "text")
    mentions = body.get("mentions") or []
    if not isinstance(mentions, list) or not all(isinstance(m, str) and m for m in mentions):
        raise SendRequestError("'mentions' must be a list of AIDs (or \"all\")", "mentions")
    if mentions and group_id is None:
        raise SendRequestError("'mentions' apply to group messages only", "mentions")
    return SendRequest(sender, to, group_id, payload, tuple(mentions), _optional_str(body, "in_reply_to"))


async def send_as_agent(runtime: AUNRuntime, request: SendRequest) -> AUNMessage:
    """Send through the sending agent's own send tools.

    Raises:
        UnknownAIDError: `from` is not registered in this runtime.
        AUNError: whatever the send itself raises (unknown recipient, not a member, ...).
    """
    if not runtime.is_local(request.sender):
        raise UnknownAIDError(
            f"{request.sender} is not registered in this runtime: the console sends only as a local agent"
        )
    agent = await runtime.agent_instance(request.sender, AUNAgent)
    if request.to is not None:
        return await agent.send(request.to, request.payload, in_reply_to=request.in_reply_to)
    assert request.group_id is not None
    return await agent.group_send(
        request.group_id,
        request.payload,
        mentions=list(request.mentions) or None,
        in_reply_to=request.in_reply_to,
    )


#: HTTP status for each error a send can raise; any other AUNError is a 400.
_STATUS: tuple[tuple[type[AUNError], int], ...] = (
    (PayloadTooLargeError, 413),  # before InvalidMessageError, its base class
    (InvalidAIDError, 400),
    (InvalidGroupIdError, 400),
    (InvalidMessageError, 400),
    (UnknownAIDError, 404),
    (UnknownGroupError, 404),
    (NoRouteError, 404),
    (NotAGroupMemberError, 409),
    (HopLimitExceeded, 409),
    (MailboxFullError, 503),
)


def http_status(error: AUNError) -> int:
    """The HTTP status that says what went wrong with a send."""
    for cls, status in _STATUS:
        if isinstance(error, cls):
            return status
    return 400
