"""`group.*` calls the client makes around a session: its group list and who is online.

After connecting, the client lists its groups (and its invitations: `._group_invite_methods`).
Group end-to-end encryption is in `._group_e2ee_state_methods` and `._group_e2ee_send_methods`.
"""

from __future__ import annotations

from typing import Any

from ._gateway_core import Call, Method
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


GROUP_DIRECTORY_METHODS: dict[str, Method] = {
    "group.list_my": Method(list_my),
    "group.get_online_members": Method(online_members),
}
