"""A worker's view of the cluster directory: who holds which AID, and every group.

The host keeps the directory and sends it to each worker: a snapshot when the worker connects, then
every change, on the same stream as the messages. Group changes are asked of the host (so every
worker sees one membership) and applied here as soon as the host has accepted them, so a worker
always sees its own changes. When the host restarts it knows nothing; AIDs missing from its new
snapshot are taken to be *away* (their workers will register them again), not unknown, so that
messages to them are kept quietly rather than refused.

A service AID (several workers hold it, see `._service_routing`) has the holder `service`
and a third element: its policy, instances and *epoch*. A new epoch means an instance was lost, so
what was sent to the AID and not acknowledged is sent again (`on_held` is called, as when a
plain AID is held again).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from protocols.aun import DispatchMode

from ..base._errors import AgentRegistrationError, UnknownGroupError
from ..delivery._directory import AIDStatus, GroupInfo
from ._errors import HostUnavailableError

__all__ = ["DirectoryView"]

logger = logging.getLogger("aun_runtime.distributed")

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


class DirectoryView:
    """The `Directory` of a worker.

    Args:
        call: makes a call to the host's directory service.
        on_held: called with an AID that has just become held (its kept messages can go out).
    """

    keeps_undeliverable = True

    def __init__(self, call: Call, on_held: Callable[[str], None]) -> None:
        self._call = call
        self._on_held = on_held
        self._aids: dict[str, tuple[str, AIDStatus]] = {}
        self._groups: dict[str, GroupInfo] = {}
        self._services: dict[str, dict[str, Any]] = {}  # service aid -> policy, epoch, instances
        self.held_groups: set[str] = set()  # groups this worker created: announced again after a host restart
        self._unannounced: set[str] = set()  # created before the first connection: the host checks them
        self.online = False

    # -- the Directory protocol ----------------------------------------------------------------------

    def aid_status(self, aid: str) -> AIDStatus:
        entry = self._aids.get(aid)
        return entry[1] if entry is not None else AIDStatus.UNKNOWN

    def holder(self, aid: str) -> str | None:
        entry = self._aids.get(aid)
        return entry[0] if entry is not None else None

    def service(self, aid: str) -> dict[str, Any] | None:
        """A service AID's policy, epoch and instances (`{worker: "live" | "away"}`); None for a plain AID."""
        return self._services.get(aid)

    def group(self, group_id: str) -> GroupInfo | None:
        return self._groups.get(group_id)

    def group_ids(self) -> list[str]:
        return sorted(self._groups)

    def delivery_order(self, group_id: str) -> list[str]:
        """The members in AID order: every worker sends a post's copies in the same order."""
        info = self._groups.get(group_id)
        return [] if info is None else sorted(info.members)

    def registered(self, aid: str) -> None:
        """Nothing to do: the worker tells the host itself (`mark_held`)."""

    def next_seq(self, group_id: str) -> int | None:
        """None: a cluster's group posts are not numbered (each worker would count its own)."""
        return None

    def was_member(self, group_id: str, aid: str, seq: int) -> bool:
        """True: a post goes to the members the sending worker sees, which decided already."""
        return True

    def mark_held(self, aid: str, worker: str) -> None:
        """This worker has just registered `aid`: no need to wait for the host to say so."""
        self.apply({"aids": {aid: [worker, AIDStatus.HELD.value]}})

    async def create_group(self, group_id: str, members: Sequence[str], dispatch_mode: DispatchMode) -> GroupInfo:
        if not self.online:
            if group_id in self._groups:
                raise AgentRegistrationError(f"group {group_id} already exists")
            info = GroupInfo(group_id, frozenset(members), dispatch_mode)
            return self._keep_for_later(info)
        info = await self._group_call("create", group_id, members=list(members), mode=str(dispatch_mode))
        self.held_groups.add(group_id)
        return info

    async def add_member(self, group_id: str, aid: str) -> GroupInfo:
        if not self.online:
            info = self._own_group(group_id)
            return self._keep_for_later(GroupInfo(group_id, info.members | {aid}, info.dispatch_mode))
        return await self._group_call("add", group_id, aid=aid)

    async def remove_member(self, group_id: str, aid: str) -> GroupInfo:
        if not self.online:
            info = self._own_group(group_id)
            return self._keep_for_later(GroupInfo(group_id, info.members - {aid}, info.dispatch_mode))
        return await self._group_call("remove", group_id, aid=aid)

    async def set_dispatch_mode(self, group_id: str, dispatch_mode: DispatchMode) -> GroupInfo:
        if not self.online:
            info = self._own_group(group_id)
            return self._keep_for_later(GroupInfo(group_id, info.members, dispatch_mode))
        return await self._group_call("mode", group_id, mode=str(dispatch_mode))

    def _own_group(self, group_id: str) -> GroupInfo:
        """Offline, only this worker's own groups can change (the host hears of it on connect)."""
        info = self._groups.get(group_id)
        if info is None:
            raise UnknownGroupError(f"no group {group_id!r}; create it with create_group()")
        if group_id not in self.held_groups:
            raise HostUnavailableError(f"group {group_id} belongs to another worker and the host is not reachable now")
        return info

    def _keep_for_later(self, info: GroupInfo) -> GroupInfo:
        self._groups[info.group_id] = info
        if info.group_id not in self.held_groups:
            self.held_groups.add(info.group_id)
            self._unannounced.add(info.group_id)
        return info

    # -- host traffic ------------------------------------------------------------------------------

    async def announce(self) -> None:
        """After a (re)connect: give the host the groups this worker created, as they stand."""
        for group_id in sorted(self.held_groups):
            info = self._groups.get(group_id)
            if info is not None:
                op = "create" if group_id in self._unannounced else "announce"
                await self._group_call(op, group_id, members=sorted(info.members), mode=str(info.dispatch_mode))
                self._unannounced.discard(group_id)

    def apply(self, body: dict[str, Any]) -> None:
        """Apply a snapshot or a change sent by the host."""
        aids: dict[str, list[str]] = body.get("aids", {})
        if body.get("snapshot"):
            for aid, (worker, status) in list(self._aids.items()):
                if aid not in aids and status is AIDStatus.HELD:
                    self._aids[aid] = (worker, AIDStatus.AWAY)
        for aid, entry in aids.items():
            if entry is None:
                self._aids.pop(aid, None)
                self._services.pop(aid, None)
                continue
            worker, status = entry[0], AIDStatus(entry[1])
            before = self._aids.get(aid)
            self._aids[aid] = (worker, status)
            epoch_before = self._services[aid]["epoch"] if aid in self._services else None
            if len(entry) > 2 and isinstance(entry[2], dict):
                self._services[aid] = entry[2]
            else:
                self._services.pop(aid, None)
            epoch = self._services[aid]["epoch"] if aid in self._services else None
            if status is AIDStatus.HELD and (before != (worker, status) or epoch != epoch_before):
                self._on_held(aid)
        for group_id, group in body.get("groups", {}).items():
            if group is None:
                self._groups.pop(group_id, None)
            else:
                self._groups[group_id] = _group_info(group_id, group)

    def mark_all_away(self) -> None:
        """The host is gone: nobody is reachable until it is back."""
        for aid, (worker, status) in list(self._aids.items()):
            if status is AIDStatus.HELD:
                self._aids[aid] = (worker, AIDStatus.AWAY)

    async def _group_call(self, op: str, group_id: str, **fields: Any) -> GroupInfo:
        answer = await self._call("Group", {"op": op, "group": group_id, **fields})
        error = answer.get("error")
        if error == "exists":
            raise AgentRegistrationError(answer["message"])
        if error is not None:
            raise UnknownGroupError(answer["message"])
        info = _group_info(group_id, answer["group"])
        self._groups[group_id] = info
        return info

    def snapshot(self) -> dict[str, Any]:
        return {
            "aids": {aid: [w, str(s)] for aid, (w, s) in sorted(self._aids.items())},
            "groups": {g: sorted(i.members) for g, i in sorted(self._groups.items())},
        }


def _group_info(group_id: str, group: dict[str, Any]) -> GroupInfo:
    return GroupInfo(group_id, frozenset(group["members"]), DispatchMode(group["mode"]))
