"""`message.thought.*`: what one party of a direct conversation thought about one of its messages.

A thought is relayed as the client sends it: a V2 end-to-end encrypted envelope
(`e2ee.p2p_encrypted`, the same form as a message), opaque here. It is kept in memory only: no
seq, no ack, nothing on disk; a restart forgets every thought, and the bounds below drop the oldest.

`message.thought.put` (`to`, `payload`, `thought_id`, `timestamp`, `context` =
`{"type": "message", "id": <message_id>}`) stores one; the message must be one between the
sender and `to`, in either direction. `message.thought.get` (`sender_aid`, `context`)
answers `{found, sender_aid, peer_aid, context, thoughts}` with the thoughts `sender_aid` put
about that message for the caller; only the two parties of the message may ask.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ._auth_methods import check_aid
from ._errors import ErrorCode, RPCError
from ._gateway_core import Call, Method
from ._thoughts import CONTEXT_TYPE, MAX_THOUGHT_BYTES

__all__ = ["THOUGHT_METHODS", "context_message_id", "thought_payload"]

def context_message_id(call: Call) -> str:
    """The id of the message a thought is about (its `context`), checked as the client sends it."""
    context = call.params.mapping("context")
    if context.get("type") != CONTEXT_TYPE:
        raise RPCError.bad_param("context.type", f"'context.type' must be {CONTEXT_TYPE!r}: a thought is about a message")
    message_id = context.get("id")
    if not isinstance(message_id, str) or not message_id.strip() or len(message_id) > 128:
        raise RPCError.bad_param("context.id", "'context.id' must be the id of a message (at most 128 characters)")
    return message_id


def thought_payload(call: Call) -> dict[str, Any]:
    """The thought's `payload` (an opaque envelope), refused past `MAX_THOUGHT_BYTES`."""
    payload: dict[str, Any] = call.params.mapping("payload")
    size = len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_THOUGHT_BYTES:
        raise RPCError.bad_param("payload", f"a thought is at most {MAX_THOUGHT_BYTES} bytes, this one {size}",
                                 reason="too_large", limit=MAX_THOUGHT_BYTES)
    return payload


def _between(call: Call, one: str, other: str, message_id: str) -> bool:
    """Whether `message_id` is a direct message from `one` to `other` or back."""
    for sender, receiver in ((one, other), (other, one)):
        stored = call.core.inboxes.find_sent(sender, message_id)
        if stored is not None and stored.receiver == receiver:
            return True
    return False


async def put(call: Call) -> dict[str, Any]:
    params, sender = call.params, call.aid
    to = check_aid(params.text("to", max_length=253), "to")
    message_id = context_message_id(call)
    payload = thought_payload(call)
    if not _between(call, sender, to, message_id):
        raise RPCError(ErrorCode.PERMISSION_DENIED,
                       f"message {message_id!r} is not one between {sender} and {to}", field="context.id")
    thought_id = params.text("thought_id", max_length=128)
    timestamp = params.integer("timestamp", default=int(time.time() * 1000))
    t_server = int(time.time() * 1000)
    call.core.thoughts.put(sender, to, message_id, {
        "thought_id": thought_id, "from": sender, "to": to, "payload": payload,
        "encrypted": bool(params.raw.get("encrypted", False)), "timestamp": timestamp, "t_server": t_server,
        "context": {"type": CONTEXT_TYPE, "id": message_id},
    })
    return {"thought_id": thought_id, "to": to, "status": "stored", "timestamp": timestamp, "t_server": t_server}


async def get(call: Call) -> dict[str, Any]:
    reader = call.aid
    sender = check_aid(call.params.text("sender_aid", max_length=253), "sender_aid")
    message_id = context_message_id(call)
    if not _between(call, sender, reader, message_id):
        raise RPCError(ErrorCode.PERMISSION_DENIED,
                       f"only the two parties of message {message_id!r} may read its thoughts", field="sender_aid")
    thoughts = call.core.thoughts.get(sender, reader, message_id)
    return {
        "found": bool(thoughts), "sender_aid": sender, "peer_aid": reader,
        "context": {"type": CONTEXT_TYPE, "id": message_id}, "thoughts": [dict(item) for item in thoughts],
    }


THOUGHT_METHODS: dict[str, Method] = {
    "message.thought.put": Method(put),
    "message.thought.get": Method(get),
}
