"""`message.*`: direct messages, the peer directory, pulls with coverage proofs, acks, E2EE prekeys.

The sender of every message is the connection's AID, never a parameter. A payload is stored and
relayed as it is: an end-to-end encrypted envelope (`e2ee.p2p_encrypted`, the client's default)
is opaque here, and only its routing fields are visible.

A pull answers with a *coverage proof* the client checks strictly: `scan_after_seq` (where the
scan began), `covered_through_seq` (the inbox was scanned up to here and every message from the
sender in between is in the page) and `head_seq` (the inbox head). `persistent_has_more` is
true exactly when the page stopped before the head.
"""

from __future__ import annotations

import base64
import binascii
import time
import uuid
from typing import Any

from ._auth_methods import check_aid
from ._errors import ErrorCode, RPCError
from ._gateway_core import Call, Method
from ._inboxes import StoredMessage

__all__ = ["MESSAGE_METHODS"]

_DEFAULT_PAGE = 50
_PREKEY_FIELDS = ("key_source", "spk_id", "spk_pk", "spk_signature", "spk_timestamp")


def _peer_scope(call: Call) -> None:
    scope = call.params.raw.get("cursor_scope", "peer")
    if scope != "peer":
        raise RPCError.bad_param("cursor_scope", "only cursor_scope 'peer' is supported")


def _sender_param(call: Call) -> str:
    return check_aid(call.params.text("sender_aid", max_length=253), "sender_aid")


def _send_result(stored: StoredMessage, status: str) -> dict[str, Any]:
    return {
        "message_id": stored.row["message_id"], "seq": stored.seq, "to": stored.receiver, "status": status,
        "timestamp": stored.row["t_server"],
    }


async def send(call: Call) -> dict[str, Any]:
    core, params, sender = call.core, call.params, call.aid
    to = check_aid(params.text("to", max_length=253), "to")
    if not core.identities.is_registered(to):
        raise RPCError.bad_param("to", f"no AID {to!r} is registered on this gateway", reason="unknown_recipient")
    payload = params.mapping("payload")
    message_id = params.text("message_id", default=None, max_length=128) or uuid.uuid4().hex
    need_render = params.boolean("need_render", default=True)
    payload_type = payload.get("type")
    kind = params.text("type", default=None, max_length=64) or (payload_type if isinstance(payload_type, str) else "")
    previous = core.inboxes.find_sent(sender, message_id)
    if previous is not None:  # a retry: same answer, no second copy, no second push
        if previous.receiver != to:
            raise RPCError.bad_param("message_id", f"message_id {message_id!r} was already used for another recipient")
        return _send_result(previous, "duplicate")
    if "device_id" not in params.raw:  # a message for one device of the receiver is wrapped for it alone
        _check_recipients(call, to, payload)
    row = {
        "message_id": message_id, "from_aid": sender, "sender_aid": sender, "to": to, "version": "v1",
        "legacy_v1": {"payload": payload, "to": to}, "type": kind, "t_server": int(time.time() * 1000),
        "need_render": need_render, "sender_device_id": call.session.device_id,
    }
    stored = core.inboxes.append(to, sender, message_id, row)
    # In queue mode: the one connection it goes to, recorded with it (or the member, not online,
    # that it waits for with the sender's other messages: then nobody is pushed).
    queued, member = core.queue.route(stored)
    await core.db.commit()  # durable before anyone hears of it
    if member is not None:
        pushed = int(core.queue.push(stored, member))
    elif queued:
        pushed = 0
    else:
        pushed = core.push(to, "message.received", lambda s: stored.push_params(s.device_id, s.slot_id))
    core.events.emit("message.stored", sender=sender, to=to, seq=stored.seq, message_id=message_id, pushed=pushed)
    return _send_result(stored, "delivered" if pushed else "stored")


def _check_recipients(call: Call, to: str, payload: dict[str, Any]) -> None:
    """Refuse an encrypted message to a queue AID that a member with a published prekey cannot read
    (see `QueueRouter.unwrapped_members`): the AUN client fetches the bootstrap again and resends."""
    missing = call.core.queue.unwrapped_members(to, payload)
    if not missing:
        return
    published = {device["device_id"] for device in call.core.identities.prekeys(to)}
    missing = [device for device in missing if device in published]
    if missing:
        raise RPCError(
            ErrorCode.E2EE_RECIPIENTS_STALE,
            f"recipient_devices_changed: the message is not wrapped for {to}'s device(s) {', '.join(missing)}; "
            "fetch message.v2.bootstrap again and wrap it for every device",
            reason="recipient_devices_changed", field="payload.recipients", missing_devices=missing, retryable=True,
        )


async def peers(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    device_id, slot_id = call.own_device()
    kind = params.text("filter", default="pending", max_length=16)
    if kind not in ("pending", "all"):
        raise RPCError.bad_param("filter", "'filter' must be 'pending' or 'all'")
    result: dict[str, Any] = {"cursor_scope": "peer", "catalog_ready": True, "bootstrap_floor_seq": 0}
    queue = call.session.delivery_mode.queue  # a queue member sees only its own share (see _queue)
    if kind == "pending":
        entries = (core.queue.peers(call.session, pending_only=True) if queue
                   else core.inboxes.peers(call.aid, device_id, slot_id, pending_only=True))
        return {**result, "peers": [e.to_wire() for e in entries], "has_more": False}
    limit = params.integer("limit", default=core.limits.max_page, minimum=1, maximum=core.limits.max_page)
    token = params.text("page_token", default="", max_length=400)
    try:
        after = base64.urlsafe_b64decode(token.encode()).decode() if token else ""
    except (binascii.Error, UnicodeDecodeError):
        raise RPCError.bad_param("page_token", "'page_token' is not one this gateway returned") from None
    if queue:
        entries = core.queue.peers(call.session, pending_only=False, after_sender=after, limit=limit + 1)
    else:
        entries = core.inboxes.peers(call.aid, device_id, slot_id, pending_only=False, after_sender=after,
                                     limit=limit + 1)
    has_more = len(entries) > limit
    entries = entries[:limit]
    if has_more:
        result["next_page_token"] = base64.urlsafe_b64encode(entries[-1].sender_aid.encode()).decode()
    return {**result, "peers": [e.to_wire() for e in entries], "has_more": has_more}


async def pull(call: Call) -> dict[str, Any]:
    core, params, receiver = call.core, call.params, call.aid
    _peer_scope(call)
    device_id, slot_id = call.own_device()
    sender = _sender_param(call)
    head = core.inboxes.head(receiver)
    after = params.integer("after_seq", default=0)
    if after > head:
        raise RPCError.bad_param("after_seq", f"'after_seq' {after} is past the inbox head {head}")
    limit = params.integer("limit", default=_DEFAULT_PAGE, minimum=1, maximum=core.limits.max_page)
    if "ack_up_to_seq" in params.raw:
        acked = core.inboxes.acknowledge(receiver, device_id, slot_id, sender, params.integer("ack_up_to_seq"))
        core.queue.acknowledged(call.session, sender, acked)
        await core.db.commit()
        core.events.emit("message.acked", receiver=receiver, sender=sender, device_id=device_id, ack_seq=acked)
    if call.session.delivery_mode.queue:  # the member's share; unassigned messages become its own
        rows, more = core.queue.pull(call.session, sender, after, limit, core.limits.max_page_bytes)
        await core.db.commit()
    else:
        rows, more = core.inboxes.pull(receiver, sender, after, limit, core.limits.max_page_bytes)
    covered = rows[-1]["seq"] if more else head
    return {
        "cursor_scope": "peer", "sender_aid": sender, "messages": rows, "has_more": more,
        "persistent_has_more": more, "volatile_has_more": False, "scan_after_seq": after,
        "covered_through_seq": covered, "next_after_seq": covered, "head_seq": head, "retention_floor_seq": 0,
        "server_ack_seq": core.inboxes.ack_seq(receiver, device_id, slot_id, sender),
    }


async def ack(call: Call) -> dict[str, Any]:
    core, params, receiver = call.core, call.params, call.aid
    _peer_scope(call)
    device_id, slot_id = call.own_device()
    sender = _sender_param(call)
    effective = core.inboxes.acknowledge(receiver, device_id, slot_id, sender, params.integer("up_to_seq"))
    core.queue.acknowledged(call.session, sender, effective)
    await core.db.commit()
    core.events.emit("message.acked", receiver=receiver, sender=sender, device_id=device_id, ack_seq=effective)
    return {"cursor_scope": "peer", "sender_aid": sender, "effective_ack_seq": effective, "peer_ack_seq": effective}


async def put_peer_pk(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    peer = params.raw.get("peer_aid", call.aid)
    if peer != call.aid:
        raise RPCError.bad_param("peer_aid", "a connection publishes only its own AID's prekey")
    body: dict[str, Any] = {"key_source": params.text("key_source", default="peer_device_prekey", max_length=64)}
    for name in _PREKEY_FIELDS[1:-1]:
        body[name] = params.text(name, max_length=4096)
    body["spk_timestamp"] = params.integer("spk_timestamp")
    core.identities.put_prekey(call.aid, call.session.device_id, body)
    await core.db.commit()
    return {"ok": True, "device_id": call.session.device_id}


async def bootstrap(call: Call) -> dict[str, Any]:
    core = call.core
    peer = check_aid(call.params.text("peer_aid", max_length=253), "peer_aid")
    if not core.identities.is_registered(peer):
        raise RPCError.bad_param("peer_aid", f"no AID {peer!r} is registered on this gateway")
    return {"peer_aid": peer, "peer_devices": core.identities.prekeys(peer), "audit_recipients": []}


MESSAGE_METHODS: dict[str, Method] = {
    "message.send": Method(send),
    "message.peers": Method(peers),
    "message.v2.pull": Method(pull),
    "message.v2.ack": Method(ack),
    "message.v2.put_peer_pk": Method(put_peer_pk),
    "message.v2.bootstrap": Method(bootstrap),
}
