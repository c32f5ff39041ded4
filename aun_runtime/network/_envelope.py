"""`AUNMessage` to and from the AUN wire: `message.send`/`group.send` params and client events.

An AUN message on the wire is an envelope the network fills in (`message_id`, sender, `seq`,
time, and for groups `group_id` and the `mention_mode` snapshot) around a `payload` that is
the application's own JSON object, end-to-end encrypted by default. What an
[`AUNMessage`][aun_runtime.AUNMessage] has beyond that travels inside the payload, in the fields the AUN payload
reference defines for it, so that any AUN client reads them:

* `in_reply_to` as `payload.reply_to = {"message_id": ...}`;
* `thread` as `payload.thread_id`;
* the hop count, which keeps the loop guard working across runtimes, in
  `payload.client_context.aun_envelope` together with the names of the fields added here, so the
  receiving runtime removes exactly those and hands its agent the payload the sender built.

A payload of a type this runtime does not model is sent and received whole. A field the sender's
payload already has (its own `reply_to`...) is never overwritten.

The copy of a local group's message for a member elsewhere is a direct message whose envelope
carries the group (`group_id`, `seq`, mode) and the original `message_id`; its wire id is
derived per member (the network refuses one id for two recipients). A receiving runtime rebuilds
the group message, so its channel applies the group's mode; any other client reads a direct message.
"""

from __future__ import annotations

import hashlib
from typing import Any

from protocols.aun import AUNMessage, UnknownPayload, validate_aid
from protocols.errors import AUNError, InvalidAIDError, InvalidGroupIdError, InvalidMessageError

from ._frame_guard import unreadable_reason

__all__ = ["ENVELOPE_KEY", "copy_message_id", "message_from_event", "payload_to_wire", "send_call"]

#: Where the runtime's own envelope fields ride, inside ``payload.client_context``.
ENVELOPE_KEY = "aun_envelope"
#: The longest message id the network accepts.
_MAX_WIRE_ID = 128


def payload_to_wire(message: AUNMessage) -> dict[str, Any]:
    """The payload as the JSON object AUN clients read (unset optional fields left out)."""
    payload = message.payload
    if isinstance(payload, UnknownPayload):  # kept whole, explicit nulls included
        return payload.model_dump(mode="json", by_alias=True)
    return payload.model_dump(mode="json", by_alias=True, exclude_none=True)


def copy_message_id(message_id: str, member: str) -> str:
    """The wire id of one member's copy of a group message: stable, unique per member, <= 128 chars."""
    digest = hashlib.blake2s(member.encode(), digest_size=6).hexdigest()
    return f"{message_id[: _MAX_WIRE_ID - len(digest) - 1]}.{digest}"


def send_call(
    message: AUNMessage, recipient: str | None, *, encrypt: bool, traceparent: str | None = None
) -> tuple[str, dict[str, Any]]:
    """The RPC that puts `message` on the network: `(method, params)`.

    Args:
        message: what the local sender sent.
        recipient: the direct recipient, or the member a local group's copy is for; None for a
            message to a network group.
        encrypt: end-to-end encrypt the message, direct or group (the client's default).
        traceparent: the W3C trace context it was sent in (`aun_runtime.base._trace_context`), if any.
    """
    payload = payload_to_wire(message)
    added: list[str] = []
    envelope: dict[str, Any] = {"hops": message.hops}
    if traceparent is not None:
        envelope["traceparent"] = traceparent
    if message.in_reply_to is not None and "reply_to" not in payload:
        payload["reply_to"] = {"message_id": message.in_reply_to}
        added.append("reply_to")
    if message.thread is not None and "thread_id" not in payload:
        payload["thread_id"] = message.thread
        added.append("thread_id")
    context = payload.get("client_context")
    if context is None:
        context = {}
        added.append("client_context")
    if isinstance(context, dict):  # a sender's own non-object client_context is left alone
        payload["client_context"] = {**context, ENVELOPE_KEY: envelope}
    envelope["added"] = added
    wire_id = message.message_id
    if recipient is None:
        params: dict[str, Any] = {"group_id": message.group_id, "payload": payload, "message_id": wire_id}
        if not encrypt:
            params["encrypt"] = False
        return "group.send", params
    if message.group_id is not None:  # a local group's copy for a member elsewhere
        envelope["group"] = {
            "group_id": message.group_id,
            "seq": message.seq,
            "dispatch_mode": None if message.dispatch_mode is None else message.dispatch_mode.value,
        }
        envelope["message_id"] = message.message_id
        wire_id = copy_message_id(message.message_id, recipient)
    params = {"to": recipient, "payload": payload, "message_id": wire_id}
    if not encrypt:
        params["encrypt"] = False
    return "message.send", params


def message_from_event(event: dict[str, Any], recipient: str, *, group: bool) -> AUNMessage:
    """The [`AUNMessage`][aun_runtime.AUNMessage] for a `message.received` (or, with `group`, a
    `group.message_created`) event the client delivered to `recipient`.

    Raises:
        InvalidMessageError: the event does not make a valid message (the field is named).
    """
    raw = event.get("payload")
    unreadable = unreadable_reason(raw)
    if unreadable is not None:
        raise InvalidMessageError(f"the AUN client could not read it: {unreadable}", field="payload")
    if not isinstance(raw, dict):
        raise InvalidMessageError(f"the payload is {type(raw).__name__}, not a JSON object", field="payload")
    payload = dict(raw)
    envelope = _take_envelope(payload)
    reply_to = payload.get("reply_to")
    in_reply_to = reply_to.get("message_id") if isinstance(reply_to, dict) else None
    thread = payload.get("thread_id")
    if envelope is not None:
        for name in envelope.get("added") or ():
            payload.pop(str(name), None)
    fields: dict[str, Any] = {
        "message_id": event.get("message_id"),
        "from_aid": event.get("from") or event.get("sender_aid") or event.get("from_aid"),
        "seq": event.get("seq"),
        "payload": payload,
        "in_reply_to": in_reply_to if isinstance(in_reply_to, str) else None,
        "thread": thread if isinstance(thread, str) else None,
        "hops": envelope.get("hops", 0) if envelope is not None else 0,
    }
    created = event.get("t_server") or event.get("timestamp") or event.get("created_at")
    if isinstance(created, int) and not isinstance(created, bool):
        fields["created_at"] = created
    if group:
        mode = event.get("mention_mode")
        if mode is not None and payload.get("mention_mode") == mode:
            payload.pop("mention_mode")  # the client copies the group's snapshot into the payload
        fields.update(group_id=event.get("group_id"), dispatch_mode=mode or payload.pop("mention_mode", None))
    elif envelope is not None and isinstance(envelope.get("group"), dict):
        copied = envelope["group"]
        fields.update(
            group_id=copied.get("group_id"),
            seq=copied.get("seq"),
            dispatch_mode=copied.get("dispatch_mode"),
            message_id=envelope.get("message_id", fields["message_id"]),
        )
    else:
        fields["to"] = recipient
    try:
        return AUNMessage.from_dict(fields)
    except InvalidMessageError:
        raise
    except AUNError as exc:  # an AID or group id the runtime cannot carry
        raise InvalidMessageError(str(exc), field=_bad_identifier(fields, exc)) from None


def _bad_identifier(fields: dict[str, Any], error: AUNError) -> str:
    if isinstance(error, InvalidGroupIdError):
        return "group_id"
    try:
        validate_aid(fields["from_aid"])
    except (InvalidAIDError, TypeError):
        return "from_aid"
    return "payload"  # an AID inside the payload (a mention)


def _take_envelope(payload: dict[str, Any]) -> dict[str, Any] | None:
    """Remove the runtime's envelope from `payload` (in place) and return it, if there is one."""
    context = payload.get("client_context")
    if not isinstance(context, dict) or not isinstance(context.get(ENVELOPE_KEY), dict):
        return None
    rest = {key: value for key, value in context.items() if key != ENVELOPE_KEY}
    payload["client_context"] = rest
    envelope: dict[str, Any] = context[ENVELOPE_KEY]
    return envelope
