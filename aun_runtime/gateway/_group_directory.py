"""``group.*`` calls the client makes around a session: its group list, who is online, invitations,
and the group end-to-end encryption calls (which this gateway answers without supporting them).

After connecting, the client lists its groups and invitations; around group messages it publishes a
group key and asks for pending state proposals. Those get harmless answers (nothing stored, no
proposal). ``group.v2.bootstrap``, the start of an encrypted group send, is refused with a message
that says to send group messages with ``encrypt=False``.
"""

from __future__ import annotations

from typing import Any

from ._core import Call, Method
from ._errors import ErrorCode, RPCError
from ._group_methods import find_group, group_wire, require_member

__all__ = ["GROUP_DIRECTORY_METHODS"]


async def list_my(call: Call) -> dict[str, Any]:
    call.own_device()
    groups = [{**group_wire(call, group), "role": member.role, "join_seq": member.join_seq}
              for group, member in call.core.groups.groups_of(call.aid)]
    return {"groups": groups, "total": len(groups)}


async def online_members(call: Call) -> dict[str, Any]:
    group = find_group(call)
    require_member(call, group)
    online = [{"aid": m.aid, "role": m.role} for m in call.core.groups.members(group.group_id)
              if call.core.sessions_of(m.aid)]
    return {"group_id": group.group_id, "members": online, "total": len(online)}


async def no_invites(call: Call) -> dict[str, Any]:
    return {"items": [], "has_more": False, "total": 0}


async def accept_group_key(call: Call) -> dict[str, Any]:
    return {}


async def no_proposal(call: Call) -> dict[str, Any]:
    return {"proposal": None}


async def group_e2ee_unsupported(call: Call) -> dict[str, Any]:
    raise RPCError(ErrorCode.METHOD_NOT_FOUND, "group end-to-end encryption is not supported by this gateway: "
                   "send group messages with encrypt=False", unsupported="group_e2ee_v2")


GROUP_DIRECTORY_METHODS: dict[str, Method] = {
    "group.list_my": Method(list_my),
    "group.list_my_invites": Method(no_invites),
    "group.get_online_members": Method(online_members),
    "group.v2.put_group_pk": Method(accept_group_key),
    "group.v2.get_proposal": Method(no_proposal),
    "group.v2.bootstrap": Method(group_e2ee_unsupported),
}
