"""`group.invite_member` and the invitee's answers: `accept_invite`, `reject_invite`; and
`revoke_invite` by the inviter, `list_my_invites` by the invitee.

An invitation writes nothing into the member list: the invitee becomes a member only by accepting.
In a `public` group any member invites; otherwise only the owner and admins. Inviting the same
AID again by the same inviter answers the first invitation (a retried call); several inviters'
invitations of one AID into one group are one *aggregate* for the invitee, which accepting or
rejecting ends as a whole (revoking ends only the inviter's own).

Pushes: the invitee gets `event/group.invite_created` (the client turns it into
`group.invite_received`) and `event/group.invite_finalized` when its aggregate ends; accepting
is announced to the group as `group.changed` `member_added`, after which the owner's client
signs a state that names the new member.

Bounds (`._group_invite_store`): pending invitations per group and per invited AID (past
either, -33004), and each expires after `INVITE_TTL_SECONDS`.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from ._auth_methods import check_aid
from ._errors import ErrorCode, RPCError
from ._gateway_core import Call, Method
from ._group_invite_store import (
    INVITE_TTL_SECONDS,
    MAX_PENDING_INVITES_PER_AID,
    MAX_PENDING_INVITES_PER_GROUP,
    GroupInviteStore,
    Invite,
)
from ._group_methods import announce, find_group, group_wire, require_member, require_room
from ._group_store import Group

__all__ = ["GROUP_INVITE_METHODS"]

_MEMBER_TYPES = ("human", "ai")


def invite_store(call: Call) -> GroupInviteStore:
    """The invitation records of the gateway's database."""
    return GroupInviteStore(call.core.db)


def _push_later(call: Call, aid: str, event: str, body: dict[str, Any]) -> None:
    """Push `event/<event>` to `aid` once the answer is sent."""
    def push() -> None:
        call.core.push(aid, event, lambda _session: body)

    call.after_reply.append(push)


def _aggregate(call: Call, group: Group | None, invites: list[Invite]) -> dict[str, Any]:
    """What the invitee sees of its pending invitations into one group."""
    first = invites[0]
    return {**first.to_wire(), "invite_ids": [i.invite_id for i in invites],
            "inviter_aids": list(dict.fromkeys(i.inviter_aid for i in invites)),
            "group_name": group.name if group is not None else "",
            "group": group_wire(call, group) if group is not None else None}


def _finalized(invitee: str, group_id: str, ended: list[str], status: str, remaining: list[Invite]) -> dict[str, Any]:
    return {"group_id": group_id, "group_aid": group_id, "invitee_aid": invitee, "invite_ids": ended,
            "invite_id": ended[0] if ended else "", "status": "pending" if remaining else status,
            "final_status": status, "pending_invite_ids": [i.invite_id for i in remaining],
            "pending_inviter_aids": list(dict.fromkeys(i.inviter_aid for i in remaining))}


async def invite_member(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    group = find_group(call)
    require_member(call, group, manage=group.visibility != "public")
    field = "invitee_aid" if "invitee_aid" in params.raw else "aid"
    invitee = check_aid(params.text(field, max_length=253), field)
    if not core.identities.is_registered(invitee):
        raise RPCError.bad_param(field, f"no AID {invitee!r} is registered on this gateway")
    if core.groups.member(group.group_id, invitee) is not None:
        raise RPCError(ErrorCode.GROUP_ALREADY_MEMBER, f"{invitee} is already a member of {group.group_id}",
                       field=field)
    member_type = params.text("member_type", default="human", max_length=16)
    if member_type not in _MEMBER_TYPES:
        raise RPCError.bad_param("member_type", "'member_type' must be 'human' or 'ai'")
    store = invite_store(call)
    pending = store.of_pair(group.group_id, invitee)
    mine = next((i for i in pending if i.inviter_aid == call.aid), None)
    if mine is not None:  # a retried call
        return {"invite": mine.to_wire(), **mine.to_wire()}
    if store.count_for_group(group.group_id) >= MAX_PENDING_INVITES_PER_GROUP:
        raise RPCError(ErrorCode.GROUP_LIMIT_REACHED, f"{group.group_id} has {MAX_PENDING_INVITES_PER_GROUP} "
                       "invitations pending: wait for answers or revoke some", limit=MAX_PENDING_INVITES_PER_GROUP,
                       scope="group")
    if len(store.of_invitee(invitee)) >= MAX_PENDING_INVITES_PER_AID:
        raise RPCError(ErrorCode.GROUP_LIMIT_REACHED, f"{invitee} has {MAX_PENDING_INVITES_PER_AID} invitations "
                       "pending", limit=MAX_PENDING_INVITES_PER_AID, scope="invitee", field=field)
    now = time.time()
    invite = Invite("gi-" + secrets.token_hex(8), group.group_id, invitee, call.aid, member_type, now,
                    now + INVITE_TTL_SECONDS)
    store.add(invite)
    await core.db.commit()
    pushed = _aggregate(call, group, [*pending, invite])
    _push_later(call, invitee, "group.invite_created", pushed)
    core.events.emit("group.invite.created", group_id=group.group_id, invitee=invitee, inviter=call.aid)
    return {"invite": invite.to_wire(), **invite.to_wire()}


def _own_invite(call: Call) -> Invite:
    """The pending invitation `invite_id` of the caller (as invitee), else -33008."""
    invite_id = call.params.text("invite_id", max_length=64)
    invite = invite_store(call).get(invite_id)
    if invite is None or invite.invitee_aid != call.aid:
        raise RPCError(ErrorCode.GROUP_INVITE_INVALID, f"invitation {invite_id!r} not found or ended (accepted, "
                       "rejected, revoked or expired)", field="invite_id")
    return invite


async def accept_invite(call: Call) -> dict[str, Any]:
    core = call.core
    invite = _own_invite(call)
    store = invite_store(call)
    ended = [i.invite_id for i in store.of_pair(invite.group_id, call.aid)]
    group = core.groups.get(invite.group_id)
    if group is None or group.status != "active":
        store.end_pair(invite.group_id, call.aid)
        await core.db.commit()
        raise RPCError(ErrorCode.GROUP_STATE_INVALID, f"{invite.group_id} no longer takes members (dissolved)",
                       field="invite_id", reason="dissolved")
    member = core.groups.member(group.group_id, call.aid)
    if member is None:  # else it was added directly meanwhile: the invitation just ends
        require_room(call, group)  # a full group: the invitation stays, to accept once there is room
        member = core.groups.add_member(group, call.aid, "member")
        announce(call, group, {"action": "member_added", "member_aid": call.aid, "role": "member",
                               "actor_aid": call.aid, "invite_id": invite.invite_id, "via": "invite"})
    store.end_pair(group.group_id, call.aid)
    await core.db.commit()
    finalized = _finalized(call.aid, group.group_id, ended, "accepted", [])
    _push_later(call, call.aid, "group.invite_finalized", finalized)
    core.events.emit("group.invite.accepted", group_id=group.group_id, invitee=call.aid)
    return {"status": "accepted", "group": group_wire(call, group), "group_id": group.group_id,
            "member": member.to_wire(), "invite_id": invite.invite_id, "invite_ids": ended}


async def reject_invite(call: Call) -> dict[str, Any]:
    core = call.core
    invite = _own_invite(call)
    store = invite_store(call)
    ended = [i.invite_id for i in store.of_pair(invite.group_id, call.aid)]
    store.end_pair(invite.group_id, call.aid)
    await core.db.commit()
    finalized = _finalized(call.aid, invite.group_id, ended, "rejected", [])
    _push_later(call, call.aid, "group.invite_finalized", finalized)
    core.events.emit("group.invite.rejected", group_id=invite.group_id, invitee=call.aid)
    return {"status": "rejected", "group_id": invite.group_id, "invite_id": invite.invite_id, "invite_ids": ended}


async def revoke_invite(call: Call) -> dict[str, Any]:
    core = call.core
    invite_id = call.params.text("invite_id", max_length=64)
    store = invite_store(call)
    invite = store.get(invite_id)
    if invite is None:
        raise RPCError(ErrorCode.GROUP_INVITE_INVALID, f"invitation {invite_id!r} not found or ended",
                       field="invite_id")
    if invite.inviter_aid != call.aid:
        raise RPCError(ErrorCode.PERMISSION_DENIED, "only the one who sent an invitation revokes it",
                       field="invite_id")
    store.end(invite_id)
    await core.db.commit()
    remaining = store.of_pair(invite.group_id, invite.invitee_aid)
    finalized = _finalized(invite.invitee_aid, invite.group_id, [invite_id], "revoked", remaining)
    _push_later(call, invite.invitee_aid, "group.invite_finalized", finalized)
    return {"status": "revoked", "group_id": invite.group_id, "invite_id": invite_id,
            "invitee_aid": invite.invitee_aid}


async def list_my_invites(call: Call) -> dict[str, Any]:
    params = call.params
    page = params.integer("page", default=1, minimum=1)
    size = params.integer("size", default=50, minimum=1, maximum=call.core.limits.max_page)
    by_group: dict[str, list[Invite]] = {}
    for invite in invite_store(call).of_invitee(call.aid):  # at most MAX_PENDING_INVITES_PER_AID
        by_group.setdefault(invite.group_id, []).append(invite)
    items = [_aggregate(call, call.core.groups.get(group_id), invites) for group_id, invites in by_group.items()]
    start = (page - 1) * size
    shown = items[start:start + size]
    return {"items": shown, "invites": shown, "total": len(items), "page": page, "size": size,
            "has_more": start + size < len(items)}


GROUP_INVITE_METHODS: dict[str, Method] = {
    "group.invite_member": Method(invite_member),
    "group.accept_invite": Method(accept_invite),
    "group.reject_invite": Method(reject_invite),
    "group.revoke_invite": Method(revoke_invite),
    "group.list_my_invites": Method(list_my_invites),
}
