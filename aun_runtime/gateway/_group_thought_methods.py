"""`group.thought.*`: what a group member thought about one of the group's messages.

The group counterpart of `message.thought.*` (`._thought_methods`): the client encrypts a
thought for the group's members exactly as a group message (a V2 `e2ee.group_encrypted`
envelope), and the gateway keeps it opaque, in memory only, in the same bounded store (no seq, no
ack; a restart forgets it; the oldest are dropped first, per sender and in all).

`group.thought.put` (`group_id`, `payload`, `thought_id`, `timestamp`, `context` =
`{"type": "message", "id": <message_id>}`): the sender must be a member and the message one of
the group's. `group.thought.get` (`group_id`, `sender_aid`, `context`) answers
`{found, group_id, sender_aid, context, thoughts}`: members only, and only about a message posted
while the reader was a member (as with the messages themselves).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ._auth_methods import check_aid
from ._errors import ErrorCode, RPCError
from ._gateway_core import Call, Method
from ._group_methods import find_group, require_member
from ._group_store import Group
from ._thought_methods import context_message_id, thought_payload
from ._thoughts import CONTEXT_TYPE

__all__ = ["GROUP_THOUGHT_METHODS"]


def _key(group: Group) -> str:
    # Direct thoughts are keyed by their recipient AID; a group's are kept apart from those, even
    # from a direct conversation with the group's own AID.
    return f"group:{group.group_id}"


def _message(call: Call, group: Group) -> tuple[str, int]:
    """The `context` message's id and seq, once it is a message of `group`."""
    message_id = context_message_id(call)
    seq = call.core.groups.message_seq(group.group_id, message_id)
    if seq is None:
        raise RPCError(ErrorCode.PERMISSION_DENIED, f"{message_id!r} is no message of {group.group_id}",
                       field="context.id")
    return message_id, seq


async def put(call: Call) -> dict[str, Any]:
    params, sender = call.params, call.aid
    group = find_group(call)
    require_member(call, group)
    message_id, _ = _message(call, group)
    payload = thought_payload(call)
    thought_id = params.text("thought_id", default=None, max_length=128) or f"gt-{uuid.uuid4().hex}"
    timestamp = params.integer("timestamp", default=int(time.time() * 1000))
    t_server = int(time.time() * 1000)
    call.core.thoughts.put(sender, _key(group), message_id, {
        "thought_id": thought_id, "from": sender, "sender_aid": sender, "group_id": group.group_id,
        "payload": payload, "encrypted": bool(params.raw.get("encrypted", False)), "timestamp": timestamp,
        "t_server": t_server, "context": {"type": CONTEXT_TYPE, "id": message_id},
    })
    return {"thought_id": thought_id, "group_id": group.group_id, "status": "stored", "timestamp": timestamp,
            "t_server": t_server}


async def get(call: Call) -> dict[str, Any]:
    group = find_group(call)
    reader = require_member(call, group)
    sender = check_aid(call.params.text("sender_aid", max_length=253), "sender_aid")
    message_id, seq = _message(call, group)
    if seq <= reader.join_seq:
        raise RPCError(ErrorCode.PERMISSION_DENIED, f"{message_id!r} was posted before {call.aid} joined "
                       f"{group.group_id}", field="context.id")
    thoughts = call.core.thoughts.get(sender, _key(group), message_id)
    return {"found": bool(thoughts), "group_id": group.group_id, "sender_aid": sender,
            "context": {"type": CONTEXT_TYPE, "id": message_id}, "thoughts": [dict(item) for item in thoughts]}


GROUP_THOUGHT_METHODS: dict[str, Method] = {
    "group.thought.put": Method(put),
    "group.thought.get": Method(get),
}
