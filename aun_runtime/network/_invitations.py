"""Invitations into network groups that an exposed AID receives: accepted when the configuration
says so (`GatewayAgentConfig.accept_invitations`).

A network group's owner or admin may invite an AID instead of adding it (the AUN client's own
`create_group(members=...)` does); the invitee's client hears `group.invite_received` and the
invitation waits until the invitee accepts or rejects it, or it expires. Which groups this
runtime's agents are in is this runtime's decision, so by default an invitation is only logged; an
accepted one makes the AID a member like `group.add_member` would, and the group's messages
reach its agent from then on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from ._config import AcceptInvitation

__all__ = ["Invitations"]

log = logging.getLogger("aun_runtime.gateway")

#: Acceptances under way at once for one AID; an invitation past it waits to be accepted later
#: (the client lists pending invitations again after each connect).
MAX_ACCEPTING = 16


class Invitations:
    """Answers one exposed AID's invitations.

    Args:
        aid: the exposed AID.
        client: its AUN client.
        accept: the configuration's `accept_invitations`.
    """

    def __init__(self, aid: str, client: Any, accept: bool | AcceptInvitation) -> None:
        self.aid = aid
        self._client = client
        self._accept = accept
        self._accepting: dict[str, asyncio.Task[None]] = {}  # by invite id, at most MAX_ACCEPTING
        self.accepted = 0  #: invitations accepted

    async def heard(self, event: Mapping[str, Any]) -> None:
        """The client's `group.invite_received`: accept it in a task of its own when the
        configuration says so (the client's other events go on meanwhile). A coroutine, so that
        the client runs it on its loop: a plain function it would run on a thread of its own."""
        invite_id, group_id = event.get("invite_id"), event.get("group_id")
        if not isinstance(invite_id, str) or event.get("status", "pending") != "pending" or invite_id in self._accepting:
            return
        if not self._wanted(event):
            log.info("%s is invited into %s by %s; the invitation waits (GatewayAgentConfig.accept_invitations)",
                     self.aid, group_id, ", ".join(map(str, event.get("inviter_aids") or ())) or "someone")
            return
        if len(self._accepting) >= MAX_ACCEPTING:
            log.warning("%s: %d invitations are being accepted already; %s waits", self.aid, MAX_ACCEPTING, invite_id)
            return
        task = asyncio.ensure_future(self._accept_one(invite_id, group_id))
        self._accepting[invite_id] = task
        task.add_done_callback(lambda _: self._accepting.pop(invite_id, None))

    def _wanted(self, event: Mapping[str, Any]) -> bool:
        if callable(self._accept):
            try:
                return bool(self._accept(self.aid, event))
            except Exception:  # a policy that fails accepts nothing, and says so
                log.exception("%s: accept_invitations failed on an invitation into %s", self.aid, event.get("group_id"))
                return False
        return bool(self._accept)

    async def _accept_one(self, invite_id: str, group_id: Any) -> None:
        try:
            await self._client.call("group.accept_invite", {"invite_id": invite_id})
        except Exception as exc:  # a full group, a revoked invitation: it is the network's answer
            log.warning("%s cannot accept the invitation into %s: %s", self.aid, group_id, exc)
            return
        self.accepted += 1
        log.info("%s accepted the invitation into %s", self.aid, group_id)

    async def close(self) -> None:
        """Stop the acceptances under way (an invitation not accepted yet stays pending)."""
        tasks = list(self._accepting.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
