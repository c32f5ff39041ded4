"""`group.*`: groups of AIDs with a message log, an event log, members' cursors and a mention mode.

Only members read, post or list; only the owner and admins add members or change settings. Group
messages here are plaintext (the client posts them with `encrypt=False`); encrypted ones are
`._group_e2ee_send_methods`'s, and leaving, removing, roles and dissolving are
`._group_member_methods`' (one who left still reads the events up to its departure, here).
`mention_mode` is stored in the newer wire
spelling (`disabled`/`mention-only`) and accepted in either spelling, also as `dispatch_mode`
(`broadcast`/`mention`); filtering by mention is the receiving channel's job, never the
gateway's: every member receives every message.
"""

from __future__ import annotations

import re
import secrets
import time
import uuid
from typing import Any

from protocols.aun import mention_mode_of, parse_dispatch_mode
from protocols.errors import InvalidMessageError

from ._auth_methods import check_aid
from ._errors import ErrorCode, RPCError
from ._gateway_core import Call, Method
from ._group_store import Group, Member

__all__ = ["GROUP_METHODS", "announce", "find_group", "group_wire", "normalize_group_id", "require_member"]

_GROUP_BASE = re.compile(r"^[a-z0-9][a-z0-9_-]{3,63}$")
_DISPATCH = {"mode": "broadcast", "reason": "duty_disabled"}


def normalize_group_id(raw: str, issuer: str, field: str = "group_id") -> str:
    """`base.issuer` from any spelling the client uses (`group.issuer/base`, `base.issuer`, `base`)."""
    value = raw.strip().strip("/").lower()
    if value.startswith("group.") and "/" in value:
        domain, _, base = value[6:].partition("/")
        value = f"{base}.{domain}"
    elif "." not in value:
        value = f"{value}.{issuer}"
    base, _, domain = value.partition(".")
    if not _GROUP_BASE.match(base):
        raise RPCError.bad_param(field, f"group base {base!r} must be 4-64 of [a-z0-9_-], starting with a letter or digit")
    if domain != issuer:
        raise RPCError(ErrorCode.GROUP_NOT_FOUND, f"group {value!r} is not of this gateway's domain {issuer!r}", field=field)
    return value


def find_group(call: Call, *, dissolved: bool = False) -> Group:
    """The group the request names; a dissolved one only when `dissolved` (else -33002)."""
    raw = call.params.raw.get("group_id", call.params.raw.get("group_aid"))
    if not isinstance(raw, str) or not raw.strip():
        raise RPCError.bad_param("group_id", "'group_id' is required")
    group = call.core.groups.get(normalize_group_id(raw, call.core.issuer))
    if group is None:
        raise RPCError(ErrorCode.GROUP_NOT_FOUND, f"no group {raw!r}", field="group_id")
    if group.status == "dissolved" and not dissolved:
        raise RPCError(ErrorCode.GROUP_STATE_INVALID, f"{group.group_id} was dissolved", field="group_id",
                       reason="dissolved")
    return group


def require_member(call: Call, group: Group, *, manage: bool = False) -> Member:
    member = call.core.groups.member(group.group_id, call.aid)
    if member is None:
        raise RPCError(ErrorCode.GROUP_NOT_MEMBER, f"{call.aid} is not a member of {group.group_id}")
    if manage and not member.can_manage:
        raise RPCError(ErrorCode.GROUP_ROLE_INSUFFICIENT, f"only the owner or an admin of {group.group_id} may do this")
    return member


def require_room(call: Call, group: Group) -> None:
    """Refuse one more member past `max_group_members`."""
    limit = call.core.limits.max_group_members
    if call.core.groups.member_count(group.group_id) >= limit:
        raise RPCError(ErrorCode.GROUP_LIMIT_REACHED, f"{group.group_id} has {limit} members, the most a group may have",
                       field="group_id", scope="members", limit=limit)


def group_wire(call: Call, group: Group) -> dict[str, Any]:
    return group.to_wire(call.core.groups.member_count(group.group_id))


def announce(call: Call, group: Group, event: dict[str, Any]) -> None:
    """Record a group event and push `event/group.changed` to every member, once the answer is
    sent. The recipients are the members at the time of this call: announcing a departure before
    removing the member tells the one who left too."""
    stored = call.core.groups.append_event(group, event)
    members = [member.aid for member in call.core.groups.members(group.group_id)]

    def push_to_members() -> None:
        for aid in members:
            call.core.push(aid, "group.changed", lambda _session: stored)

    call.after_reply.append(push_to_members)


async def create(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    raw = params.raw.get("group_id", params.raw.get("group_aid", params.raw.get("group_name")))
    if raw is None:
        group_id = f"g{secrets.token_hex(6)}.{core.issuer}"
    elif isinstance(raw, str):
        group_id = normalize_group_id(raw, core.issuer)
    else:
        raise RPCError.bad_param("group_id", "'group_id' must be a string")
    if core.groups.get(group_id) is not None:
        raise RPCError.bad_param("group_id", f"group {group_id!r} already exists", reason="group_exists")
    limit = core.limits.max_groups_per_aid
    if core.groups.owned_count(call.aid) >= limit:
        raise RPCError(ErrorCode.GROUP_LIMIT_REACHED, f"{call.aid} owns {limit} groups, the most one AID may own "
                       "(dissolve one first)", scope="groups", limit=limit)
    name = params.text("name", default=group_id.partition(".")[0], max_length=128)
    visibility = params.text("visibility", default="private", max_length=32)
    description = params.raw.get("description") or ""
    if not isinstance(description, str) or len(description) > 4096:
        raise RPCError.bad_param("description", "'description' must be a string of at most 4096 characters")
    group = core.groups.create(group_id, name, call.aid, description, visibility)
    announce(call, group, {"action": "group_created", "actor_aid": call.aid})
    await core.db.commit()
    core.events.emit("group.created", group_id=group_id, owner=call.aid)
    return {"group": group_wire(call, group)}


async def add_member(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    group = find_group(call)
    require_member(call, group, manage=True)
    aid = check_aid(params.text("aid", max_length=253), "aid")
    if not core.identities.is_registered(aid):
        raise RPCError.bad_param("aid", f"no AID {aid!r} is registered on this gateway")
    if core.groups.member(group.group_id, aid) is not None:
        raise RPCError(ErrorCode.GROUP_ALREADY_MEMBER, f"{aid} is already a member of {group.group_id}", field="aid")
    role = params.text("role", default="member", max_length=16)
    if role not in ("member", "admin"):
        raise RPCError.bad_param("role", "'role' must be 'member' or 'admin'")
    require_room(call, group)
    member = core.groups.add_member(group, aid, role)
    announce(call, group, {"action": "member_added", "member_aid": aid, "role": role, "actor_aid": call.aid})
    await core.db.commit()
    return {"group": group_wire(call, group), "member": member.to_wire()}


async def get_members(call: Call) -> dict[str, Any]:
    group = find_group(call)
    require_member(call, group)
    members = [m.to_wire() for m in call.core.groups.members(group.group_id)]
    return {"group_id": group.group_id, "members": members, "total": len(members)}


async def set_settings(call: Call) -> dict[str, Any]:
    group = find_group(call)
    require_member(call, group, manage=True)
    settings = call.params.mapping("settings")
    unknown = sorted(set(settings) - {"mention_mode", "dispatch_mode"})
    if unknown:
        raise RPCError.bad_param(f"settings.{unknown[0]}", f"unknown setting {unknown[0]!r}: use mention_mode")
    if not settings:
        raise RPCError.bad_param("settings", "'settings' must name at least one setting (mention_mode)")
    values = {key: settings[key] for key in ("mention_mode", "dispatch_mode") if key in settings}
    modes = set()
    for key, value in values.items():
        try:
            modes.add(parse_dispatch_mode(value if isinstance(value, str) else repr(value)))
        except InvalidMessageError as exc:
            raise RPCError.bad_param(f"settings.{key}", str(exc)) from None
    if len(modes) != 1:
        raise RPCError.bad_param("settings", "mention_mode and dispatch_mode disagree")
    mode = modes.pop()
    call.core.groups.set_mention_mode(group, mention_mode_of(mode))
    announce(call, group, {"action": "settings_updated", "actor_aid": call.aid,
                            "settings": {"mention_mode": group.mention_mode, "dispatch_mode": mode.value}})
    await call.core.db.commit()
    return {"group_id": group.group_id, "updated_keys": sorted(values),
            "settings": {"mention_mode": group.mention_mode, "dispatch_mode": mode.value}}


def _message_push(row: dict[str, Any], device_id: str, slot_id: str) -> dict[str, Any]:
    return {
        "group_id": row["group_id"], "group_aid": row["group_aid"], "seq": row["seq"], "message_id": row["message_id"],
        "sender_aid": row["sender_aid"], "from_aid": row["from_aid"], "sender_device_id": row["sender_device_id"],
        "mention_mode": row["mention_mode"], "dispatch": _DISPATCH, "target_device_id": device_id,
        "target_slot_id": slot_id, "inline_message": row,
    }


async def send(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    group = find_group(call)
    require_member(call, group)
    call.own_device()
    payload = params.mapping("payload")
    message_id = params.text("message_id", default=None, max_length=128) or uuid.uuid4().hex
    need_render = params.boolean("need_render", default=True)
    row = core.groups.find_message(group.group_id, call.aid, message_id)
    if row is None:
        now = int(time.time() * 1000)
        row = core.groups.append_message(group, call.aid, message_id, {
            "message_id": message_id, "group_id": group.group_id, "group_aid": group.group_id,
            "from_aid": call.aid, "sender_aid": call.aid, "sender_device_id": call.session.device_id,
            "version": "v1", "payload": payload, "type": str(payload.get("type") or ""), "t_server": now,
            "created_at": now, "need_render": need_render, "mention_mode": group.mention_mode,
        })
        await core.db.commit()
        stored = row
        for member in core.groups.members(group.group_id):
            core.push(member.aid, "group.message_created", lambda s: _message_push(stored, s.device_id, s.slot_id))
        core.events.emit("group.message.stored", group_id=group.group_id, sender=call.aid, seq=row["seq"],
                         message_id=message_id)
    return {"group_id": group.group_id, "message": row, "mention_mode": row["mention_mode"], "dispatch": _DISPATCH}


def _cursor_wire(ack: int, group: Group, member: Member) -> dict[str, Any]:
    return {"current_seq": ack, "latest_seq": group.message_seq, "join_seq": member.join_seq}


async def _advance_cursor(
    call: Call, group: Group, *, message_seq: int | None = None, event_seq: int | None = None
) -> tuple[int, int]:
    """Move this device's message and/or event cursor forward (clamped to the group's latest; never
    backwards), committing if it moved. Returns (message ack, event ack)."""
    device_id, slot_id = call.own_device()
    ack, event_ack = current = call.core.groups.cursor(group.group_id, call.aid, device_id, slot_id)
    if message_seq is not None:
        ack = max(ack, min(message_seq, group.message_seq))
    if event_seq is not None:
        event_ack = max(event_ack, min(event_seq, group.event_seq))
    if (ack, event_ack) != current:
        call.core.groups.set_cursor(group.group_id, call.aid, device_id, slot_id, ack, event_ack)
        await call.core.db.commit()
    return ack, event_ack


async def pull(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    group = find_group(call)
    member = require_member(call, group)
    if "window_mode" in params.raw:
        return await _pull_tail(call, group, member)
    after = params.integer("after_seq", default=0)
    limit = params.integer("limit", default=50, minimum=1, maximum=core.limits.max_page)
    requested = params.integer("ack_up_to_seq") if "ack_up_to_seq" in params.raw else None
    ack, _ = await _advance_cursor(call, group, message_seq=requested)
    rows, more = core.groups.messages(group.group_id, max(after, member.join_seq), limit, core.limits.max_page_bytes)
    _pulled(call, group, rows)
    return {
        "group_id": group.group_id, "group_aid": group.group_id, "messages": rows, "has_more": more,
        "latest_message_seq": group.message_seq, "cursor": _cursor_wire(ack, group, member),
    }


def _pulled(call: Call, group: Group, rows: list[dict[str, Any]]) -> None:
    """Record a pull that answered messages: a member's client that takes its pushes as they come
    pulls only to fill a gap, so tests tell the two ways apart by this."""
    if rows:
        call.core.events.emit("group.messages.pulled", group_id=group.group_id, aid=call.aid,
                              through_seq=rows[-1]["seq"])


async def _pull_tail(call: Call, group: Group, member: Member) -> dict[str, Any]:
    """A tail-window pull: the newest messages after `after_seq` (at most `limit`, and what fits
    in `max_page_bytes`), with the window they prove complete, `window_start_seq` to
    `head_seq`. A client that fell behind during a burst reads the latest first this way; it
    moves no cursor."""
    core, params = call.core, call.params
    if params.text("window_mode", max_length=16) != "tail":
        raise RPCError.bad_param("window_mode", "'window_mode' must be 'tail' (or left out, for a forward pull)")
    if "ack_up_to_seq" in params.raw:
        raise RPCError.bad_param("ack_up_to_seq", "a tail-window pull acknowledges nothing: use group.v2.ack")
    after = params.integer("after_seq", default=0)
    limit = params.integer("limit", default=50, minimum=1, maximum=core.limits.max_page)
    head = group.message_seq
    start = head if head <= after else max(after + 1, head - limit + 1)
    rows = [] if head <= after else core.groups.tail(group.group_id, max(start - 1, member.join_seq), head,
                                                     core.limits.max_page_bytes)
    if rows and rows[0]["seq"] > start and len(rows) < head - max(start - 1, member.join_seq):
        start = rows[0]["seq"]  # the byte bound cut the window: it proves only what it holds
    device_id, slot_id = call.own_device()
    ack_seq, _ = core.groups.cursor(group.group_id, call.aid, device_id, slot_id)
    _pulled(call, group, rows)
    return {
        "group_id": group.group_id, "group_aid": group.group_id, "window_mode": "tail", "window_start_seq": start,
        "head_seq": head, "covered_through_seq": head, "messages": rows, "has_more": False,
        "latest_message_seq": head, "cursor": _cursor_wire(ack_seq, group, member),
    }


async def ack(call: Call) -> dict[str, Any]:
    group = find_group(call)
    member = require_member(call, group)
    ack_seq, _ = await _advance_cursor(call, group, message_seq=call.params.integer("up_to_seq"))
    return {"group_id": group.group_id, "ack_seq": ack_seq, "cursor": _cursor_wire(ack_seq, group, member)}


def _event_reader(call: Call) -> tuple[Group, int | None]:
    """The group and the last event seq the caller may read: a member reads them all (None); one
    who left (or whose group was dissolved) reads up to the announcement of it, so its client can
    fill the gap before that event and learn it is out."""
    group = find_group(call, dissolved=True)
    if call.core.groups.member(group.group_id, call.aid) is not None:
        return group, None
    upto = call.core.groups.departure(group.group_id, call.aid)
    if upto is None:
        require_member(call, group)  # raises: not a member
    return group, upto


async def pull_events(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    group, upto = _event_reader(call)
    device_id, slot_id = call.own_device()
    after = params.integer("after_event_seq", default=0)
    limit = params.integer("limit", default=50, minimum=1, maximum=core.limits.max_page)
    events = core.groups.events(group.group_id, after, limit, upto)
    _, event_ack = core.groups.cursor(group.group_id, call.aid, device_id, slot_id)
    latest = group.event_seq if upto is None else upto
    return {"group_id": group.group_id, "events": events[:limit], "has_more": len(events) > limit,
            "cursor": {"current_seq": event_ack if upto is None else latest, "latest_seq": latest}}


async def ack_events(call: Call) -> dict[str, Any]:
    group, upto = _event_reader(call)
    requested = call.params.integer("event_seq")
    if upto is not None:  # one who left keeps no cursor: the acknowledgement changes nothing
        return {"group_id": group.group_id, "ack_seq": min(max(requested, 0), upto)}
    _, event_ack = await _advance_cursor(call, group, event_seq=requested)
    return {"group_id": group.group_id, "ack_seq": event_ack}


# `group.create` is served by `_group_aid_methods` (a named group binds its AID at once): it calls
# `create` for the group itself.
GROUP_METHODS: dict[str, Method] = {
    "group.add_member": Method(add_member),
    "group.get_members": Method(get_members),
    "group.set_settings": Method(set_settings),
    "group.send": Method(send),
    "group.v2.pull": Method(pull),
    "group.v2.ack": Method(ack),
    "group.pull_events": Method(pull_events),
    "group.ack_events": Method(ack_events),
}
