"""`group.v2.send`: an end-to-end encrypted group message, stored and relayed as an opaque envelope.

The envelope (`e2ee.group_encrypted`) carries one ciphertext and one key wrap per recipient
device. The gateway checks only what routes and binds it: that the sender is a member and is the
AID and device the envelope's authenticated data names, that it was made for this group, its
current epoch and its current signed state (else -33050: the client refreshes its bootstrap and
retries), that every member of that state has a wrap (else -33052, the same) and no one else
does (a wrap for someone who has left since the state was signed is -33050 too: the sender's
bootstrap predates the departure), and that it is within the bounds below. It is then a row of
the group's message log (`version: "v2"`, the envelope as `envelope_json`), pulled whole with
`group.v2.pull`, and pushed to every member connection as `event/group.v2.message_created`
with the row inline. To a device that has acknowledged everything before it, the envelope is
cut to that device's own wrap and the proof the sender signed it (`._group_e2ee_wraps`): the
form in which its client takes the message from the push, with no pull. Members decrypt; the
gateway never can.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ._errors import ErrorCode, RPCError
from ._frames import notification_frame
from ._gateway_core import Call, Method
from ._group_e2ee_state_methods import KEY_EPOCH, committed_aids, e2ee_store
from ._group_e2ee_wraps import DeviceShares
from ._group_methods import find_group, require_member
from ._group_store import Group, Member
from ._session import Session

__all__ = ["GROUP_E2EE_SEND_METHODS", "MAX_ENVELOPE_CHARS", "MAX_RECIPIENTS"]

#: The largest envelope one encrypted group message may be (characters of its JSON).
MAX_ENVELOPE_CHARS = 512 * 1024
#: The most key wraps one envelope may carry (one per recipient device).
MAX_RECIPIENTS = 1024
_DISPATCH = {"mode": "broadcast", "reason": "duty_disabled"}
_STRING_FIELDS = ("nonce", "ciphertext", "tag", "sender_signature", "sender_session_pk", "recipients_digest")
#: A wrap row: [aid, device_id, role, key_source, fingerprint, spk_id, wrap_nonce, wrapped_key].
_ROW_LENGTH = 8
_ROLES = ("member", "self_sync", "audit")


def _bad(field: str, message: str, **data: Any) -> RPCError:
    return RPCError.bad_param(f"envelope.{field}", message, **data)


def _check_shape(envelope: dict[str, Any]) -> tuple[dict[str, Any], list[list[str]]]:
    """The envelope's authenticated data and wrap rows, once its shape is what a client makes."""
    if envelope.get("type") != "e2ee.group_encrypted" or envelope.get("version") != "v2":
        raise _bad("type", "an encrypted group message is an 'e2ee.group_encrypted' envelope of version 'v2'")
    for name in _STRING_FIELDS:
        if not isinstance(envelope.get(name), str) or not envelope[name]:
            raise _bad(name, f"'envelope.{name}' must be a non-empty string")
    aad = envelope.get("aad")
    if not isinstance(aad, dict):
        raise _bad("aad", "'envelope.aad' must be an object")
    rows = envelope.get("recipients")
    if not isinstance(rows, list) or not rows:
        raise _bad("recipients", "'envelope.recipients' must list at least one key wrap")
    if len(rows) > MAX_RECIPIENTS:
        raise _bad("recipients", f"an envelope carries at most {MAX_RECIPIENTS} key wraps", limit=MAX_RECIPIENTS)
    for row in rows:
        if not (isinstance(row, list) and len(row) == _ROW_LENGTH and all(isinstance(v, str) for v in row)):
            raise _bad("recipients", f"each key wrap is a list of {_ROW_LENGTH} strings")
        if row[2] not in _ROLES:
            raise _bad("recipients", f"a key wrap's role is one of {', '.join(_ROLES)}, not {row[2]!r}")
    return aad, rows


def _check_binding(call: Call, group_id: str, envelope: dict[str, Any], aad: dict[str, Any], message_id: str) -> None:
    """Refuse an envelope made by, or for, someone else: the client's signature covers `aad`,
    so these are the values every receiver will authenticate."""
    if aad.get("from") != call.aid:
        raise RPCError(ErrorCode.PERMISSION_DENIED, f"the envelope is from {aad.get('from')!r}, but this connection "
                       f"is {call.aid!r}", field="envelope.aad.from")
    if aad.get("from_device") != call.session.device_id:
        raise RPCError(ErrorCode.PERMISSION_DENIED, "the envelope names another device than this connection's",
                       field="envelope.aad.from_device")
    for where, value in (("aad.group_id", aad.get("group_id")), ("group_id", envelope.get("group_id"))):
        if value != group_id:
            raise _bad(where, f"the envelope was made for {value!r}, not {group_id!r}")
    if aad.get("message_id") != message_id:
        raise _bad("aad.message_id", "the envelope's message_id differs from the request's")


async def send(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    group = find_group(call)
    require_member(call, group)
    device_id, slot_id = call.own_device()
    envelope = params.mapping("envelope")
    envelope_json = json.dumps(envelope, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if len(envelope_json) > MAX_ENVELOPE_CHARS:
        raise RPCError.bad_param("envelope", f"the envelope is over {MAX_ENVELOPE_CHARS} characters",
                                 limit=MAX_ENVELOPE_CHARS)
    aad, rows = _check_shape(envelope)
    raw_id = params.raw.get("message_id") or aad.get("message_id")
    message_id = raw_id if isinstance(raw_id, str) and 0 < len(raw_id) <= 128 else None
    if message_id is None:
        raise RPCError.bad_param("message_id", "'message_id' must be a string of 1 to 128 characters")
    _check_binding(call, group.group_id, envelope, aad, message_id)
    row = core.groups.find_message(group.group_id, call.aid, message_id)
    if row is None:
        row = await _store(call, group, envelope, envelope_json, aad, rows, message_id)
    reply = {key: value for key, value in row.items() if key != "envelope_json"}
    return {"group_id": group.group_id, "group_aid": group.group_id, "seq": row["seq"], "message_id": message_id,
            "t_server": row["t_server"], "message": reply, "mention_mode": row["mention_mode"], "dispatch": _DISPATCH,
            "device_id": device_id, "slot_id": slot_id}


async def _store(call: Call, group: Group, envelope: dict[str, Any], envelope_json: str, aad: dict[str, Any],
                 rows: list[list[str]], message_id: str) -> dict[str, Any]:
    core = call.core
    state = e2ee_store(call).state(group.group_id)
    commitment = aad.get("state_commitment")
    version = commitment.get("state_version") if isinstance(commitment, dict) else None
    current = state.state_version if state is not None else 0
    if aad.get("epoch") != KEY_EPOCH or envelope.get("epoch") != KEY_EPOCH or version != current:
        raise RPCError(ErrorCode.GROUP_E2EE_STALE, f"the envelope was made for epoch {aad.get('epoch')!r} state "
                       f"{version!r}; {group.group_id} is at epoch {KEY_EPOCH} state {current}: bootstrap again",
                       epoch=KEY_EPOCH, state_version=current)
    recipients = committed_aids(call, group, state)
    wrapped = {row[0] for row in rows if row[2] != "audit"}
    strangers = sorted(wrapped - set(recipients) - {call.aid})
    departed = [aid for aid in strangers if state is not None and aid in state.committed_aids]
    if departed and len(departed) == len(strangers):
        # Made from a bootstrap taken before they left: the client drops its cache and retries.
        raise RPCError(ErrorCode.GROUP_E2EE_STALE, f"the envelope wraps the key for {departed[0]}, who has left "
                       f"{group.group_id}: bootstrap again", epoch=KEY_EPOCH, state_version=current,
                       departed_aids=departed)
    if strangers:
        raise RPCError(ErrorCode.GROUP_NOT_MEMBER, f"the envelope wraps the key for {strangers[0]}, who is not a "
                       f"recipient in {group.group_id}", field="envelope.recipients")
    missing = sorted(set(recipients) - wrapped - {call.aid})
    if missing:
        raise RPCError(ErrorCode.GROUP_E2EE_RECIPIENTS_INCOMPLETE, f"the envelope has no key wrap for {missing[0]}: "
                       "bootstrap again", expected_peer_aids=missing)
    now = int(time.time() * 1000)
    payload_type = envelope.get("payload_type")
    row = core.groups.append_message(group, call.aid, message_id, {
        "message_id": message_id, "group_id": group.group_id, "group_aid": group.group_id, "from_aid": call.aid,
        "sender_aid": call.aid, "sender_device_id": call.session.device_id, "version": "v2",
        "type": "e2ee.group_encrypted", "payload_type": payload_type if isinstance(payload_type, str) else "",
        "envelope_json": envelope_json, "epoch": KEY_EPOCH, "t_server": now, "created_at": now,
        "need_render": call.params.boolean("need_render", default=True), "mention_mode": group.mention_mode,
    })
    await core.db.commit()
    stored = row
    shares = DeviceShares(envelope)
    acks = core.groups.message_acks(group.group_id)

    def pushed(member: Member, session: Session) -> dict[str, Any]:
        # A device that has acknowledged everything before this message is pushed its own share,
        # which its client takes at once; one still behind (in a burst, say) gets the whole
        # envelope, which its client does not take from a push: it pulls what it has not seen as
        # one page, with one acknowledgement for the lot.
        acked = acks.get((member.aid, session.device_id, session.slot_id), 0)
        caught_up = max(acked, member.join_seq) == stored["seq"] - 1
        share = shares.of(member.aid, session.device_id) if caught_up else None
        inline = stored if share is None else {**stored, "envelope_json": json.dumps(
            share, ensure_ascii=False, separators=(",", ":"), allow_nan=False)}
        return {
            "group_id": stored["group_id"], "group_aid": stored["group_aid"], "seq": stored["seq"],
            "message_id": stored["message_id"], "sender_aid": stored["sender_aid"], "from_aid": stored["from_aid"],
            "sender_device_id": stored["sender_device_id"], "mention_mode": stored["mention_mode"],
            "dispatch": _DISPATCH, "target_device_id": session.device_id, "target_slot_id": session.slot_id,
            "inline_message": inline,
        }

    # Every member connection but the sending device, which holds no wrap for itself (the
    # sender's other devices do: their wraps are the "self_sync" ones).
    for member in core.groups.members(group.group_id):
        for session in core.sessions_of(member.aid):
            if member.aid != call.aid or session.device_id != call.session.device_id:
                session.push(notification_frame("event/group.v2.message_created", pushed(member, session)))
    core.events.emit("group.message.stored", group_id=group.group_id, sender=call.aid, seq=row["seq"],
                     message_id=message_id, encrypted=True)
    return row


GROUP_E2EE_SEND_METHODS: dict[str, Method] = {"group.v2.send": Method(send)}
