"""`LocalGroups`: the `Directory` of a runtime whose core is one process.

Every group lives here and no AID lives in another process, so an AID is registered in the
runtime or nowhere. Membership is measured in group sequence numbers (see `GroupState`): a post
takes the group's next `seq`, and a member sees exactly the posts made while it was one.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocols.aun import DispatchMode

from ..base._errors import AgentRegistrationError, UnknownGroupError
from ..base._groups import STILL_MEMBER, GroupInfo, GroupState
from ._directory import AIDStatus

__all__ = ["LocalGroups"]


class LocalGroups:
    """The groups of one process, as a `Directory` with no AID held elsewhere."""

    #: Nothing is kept for an AID nobody holds: in one process that is a dead letter at once.
    keeps_undeliverable = False

    def __init__(self) -> None:
        self._groups: dict[str, GroupState] = {}

    def aid_status(self, aid: str) -> AIDStatus:
        """Always unknown: no other process holds AIDs of this runtime."""
        return AIDStatus.UNKNOWN

    def group(self, group_id: str) -> GroupInfo | None:
        group = self._groups.get(group_id)
        return None if group is None else GroupInfo(group.group_id, frozenset(group.members), group.dispatch_mode)

    def group_ids(self) -> list[str]:
        return list(self._groups)

    async def create_group(self, group_id: str, members: Sequence[str], dispatch_mode: DispatchMode) -> GroupInfo:
        if group_id in self._groups:
            raise AgentRegistrationError(f"group {group_id} already exists")
        self._groups[group_id] = GroupState(group_id, dispatch_mode)
        for aid in members:
            await self.add_member(group_id, aid)
        return self._info(group_id)

    async def add_member(self, group_id: str, aid: str) -> GroupInfo:
        group = self._state(group_id)
        if aid not in group.members:
            group.members[aid] = None
            group.spans.setdefault(aid, []).append([group.last_seq, STILL_MEMBER])
        return self._info(group_id)

    async def remove_member(self, group_id: str, aid: str) -> GroupInfo:
        group = self._state(group_id)
        if aid in group.members:
            del group.members[aid]
            group.spans[aid][-1][1] = group.last_seq
        return self._info(group_id)

    async def set_dispatch_mode(self, group_id: str, dispatch_mode: DispatchMode) -> GroupInfo:
        self._state(group_id).dispatch_mode = dispatch_mode
        return self._info(group_id)

    def delivery_order(self, group_id: str) -> list[str]:
        """The members in the order they joined, or were registered here if that came later."""
        group = self._groups.get(group_id)
        return [] if group is None else list(group.members)

    def registered(self, aid: str) -> None:
        """An agent for `aid` was registered here: in its groups, its copies now go out after those
        of the members registered before it."""
        for group in self._groups.values():
            if aid in group.members:
                del group.members[aid]
                group.members[aid] = None

    def next_seq(self, group_id: str) -> int | None:
        group = self._groups.get(group_id)
        return None if group is None else group.next_seq()

    def was_member(self, group_id: str, aid: str, seq: int) -> bool:
        group = self._groups.get(group_id)
        return group is None or group.was_member(aid, seq)

    def _info(self, group_id: str) -> GroupInfo:
        info = self.group(group_id)
        assert info is not None
        return info

    def _state(self, group_id: str) -> GroupState:
        group = self._groups.get(group_id)
        if group is None:
            raise UnknownGroupError(f"no group {group_id!r} in this runtime; create it with create_group()")
        return group
