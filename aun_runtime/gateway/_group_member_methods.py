"""`group.leave`, `group.kick` / `group.remove_member`, `group.set_role` and `group.dissolve`.

Who may do what:

* any member but the owner leaves (the owner transfers the group first, or dissolves it);
* the owner removes anyone else; an admin removes plain members only; nobody removes the owner;
* the owner makes members admins and admins members; an admin may step down to member;
* only the owner dissolves; the group's pending invitations and owner transfer end with it.

A departure is announced (`group.changed` with `member_left` or `member_removed`) to the
members before it and to the one who left, then the member's row, cursors and group prekeys are
dropped, so from the next request on the gateway treats them as any outsider: no pull, no send, no
pushes, and no key wraps in anyone's next encrypted message (`committed_aids` leaves out every
non-member at once, before the owner's client signs the smaller state the event makes it propose).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._auth_methods import check_aid
from ._errors import ErrorCode, RPCError
from ._gateway_core import Call, Method
from ._group_e2ee_state_methods import e2ee_store
from ._group_invite_store import GroupInviteStore
from ._group_methods import announce, find_group, group_wire, require_member
from ._group_store import Group
from ._group_transfer_methods import cancel_transfer
from ._session import Session

__all__ = ["GROUP_MEMBER_METHODS", "drop_member"]


def _same(body: dict[str, Any]) -> Callable[[Session], dict[str, Any]]:
    """A push builder answering `body` to every session."""
    return lambda _session: body


def drop_member(call: Call, group: Group, aid: str) -> None:
    """Remove `aid` from `group` with everything the gateway keeps for it as a member."""
    call.core.groups.remove_member(group, aid)
    e2ee_store(call).drop_member(group.group_id, aid)
    cancel_transfer(call.core.db, group.group_id, new_owner=aid)


async def leave(call: Call) -> dict[str, Any]:
    group = find_group(call)
    member = require_member(call, group)
    if member.role == "owner":
        raise RPCError(ErrorCode.GROUP_STATE_INVALID, f"the owner cannot leave {group.group_id}: transfer it "
                       "(group.transfer_owner) or dissolve it (group.dissolve)", reason="owner_cannot_leave")
    announce(call, group, {"action": "member_left", "member_aid": call.aid, "aid": call.aid, "actor_aid": call.aid})
    drop_member(call, group, call.aid)
    await call.core.db.commit()
    call.core.events.emit("group.member.left", group_id=group.group_id, aid=call.aid)
    return {"group": group_wire(call, group), "group_id": group.group_id, "left_aid": call.aid}


async def kick(call: Call) -> dict[str, Any]:
    core = call.core
    group = find_group(call)
    actor = require_member(call, group, manage=True)
    aid = check_aid(call.params.text("aid", max_length=253), "aid")
    if aid == call.aid:
        raise RPCError.bad_param("aid", "to remove yourself, use group.leave")
    target = core.groups.member(group.group_id, aid)
    if target is None:
        raise RPCError(ErrorCode.GROUP_NOT_MEMBER, f"{aid} is not a member of {group.group_id}", field="aid")
    if target.role == "owner":
        raise RPCError(ErrorCode.PERMISSION_DENIED, f"the owner of {group.group_id} cannot be removed", field="aid")
    if target.role == "admin" and actor.role != "owner":
        raise RPCError(ErrorCode.GROUP_ROLE_INSUFFICIENT, f"only the owner of {group.group_id} removes an admin")
    announce(call, group, {"action": "member_removed", "member_aid": aid, "aid": aid, "actor_aid": call.aid})
    drop_member(call, group, aid)
    await core.db.commit()
    core.events.emit("group.member.removed", group_id=group.group_id, aid=aid, actor=call.aid)
    return {"group": group_wire(call, group), "group_id": group.group_id, "removed_aid": aid}


async def set_role(call: Call) -> dict[str, Any]:
    core = call.core
    group = find_group(call)
    actor = require_member(call, group, manage=True)
    aid = check_aid(call.params.text("aid", max_length=253), "aid")
    role = call.params.text("role", max_length=16)
    if role not in ("admin", "member"):
        raise RPCError.bad_param("role", "'role' must be 'admin' or 'member' (the owner changes only by transfer)")
    target = core.groups.member(group.group_id, aid)
    if target is None:
        raise RPCError(ErrorCode.GROUP_NOT_MEMBER, f"{aid} is not a member of {group.group_id}", field="aid")
    if target.role == "owner":
        raise RPCError(ErrorCode.PERMISSION_DENIED, "the owner's role changes only by group.transfer_owner",
                       field="aid")
    if actor.role != "owner" and not (aid == call.aid and role == "member"):
        raise RPCError(ErrorCode.GROUP_ROLE_INSUFFICIENT, f"only the owner of {group.group_id} sets roles "
                       "(an admin may only step down)")
    if target.role != role:
        core.groups.set_role(group.group_id, aid, role)
        announce(call, group, {"action": "role_changed", "member_aid": aid, "aid": aid, "role": role,
                               "old_role": target.role, "actor_aid": call.aid})
        await core.db.commit()
    member = core.groups.member(group.group_id, aid)
    assert member is not None
    return {"group": group_wire(call, group), "member": member.to_wire(), "old_role": target.role, "new_role": role}


async def dissolve(call: Call) -> dict[str, Any]:
    core = call.core
    group = find_group(call)
    if require_member(call, group).role != "owner":
        raise RPCError(ErrorCode.GROUP_ROLE_INSUFFICIENT, f"only the owner dissolves {group.group_id}")
    announce(call, group, {"action": "dissolved", "actor_aid": call.aid, "status": "dissolved"})
    core.groups.dissolve(group)
    e2ee_store(call).drop_group(group.group_id)
    invitees = GroupInviteStore(core.db).drop_group(group.group_id)
    cancel_transfer(core.db, group.group_id)
    await core.db.commit()
    ended = {"group_id": group.group_id, "group_aid": group.group_id, "status": "ended", "reason": "dissolved"}

    def tell_invitees() -> None:  # their pending invitations into the group end with it
        for aid in invitees:
            core.push(aid, "group.invite_finalized", _same({**ended, "invitee_aid": aid}))

    call.after_reply.append(tell_invitees)
    core.events.emit("group.dissolved", group_id=group.group_id, owner=call.aid)
    return {"group_id": group.group_id, "group_aid": group.group_id, "status": "dissolved"}


GROUP_MEMBER_METHODS: dict[str, Method] = {
    "group.leave": Method(leave),
    "group.kick": Method(kick),
    "group.remove_member": Method(kick),
    "group.set_role": Method(set_role),
    "group.dissolve": Method(dissolve),
}
