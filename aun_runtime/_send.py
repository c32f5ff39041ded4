"""The send path: how a message from a local AID becomes a publish, a copy for the network, or a
refusal with a dead letter.

Every send goes through `SendPath.send`, whether it comes from an agent's send tools or from
code outside any agent:

1. **Thread and hops.** A message sent while a handler runs (or under `acting_on`) continues the
   handled message's thread one hop further; any other starts a thread of its own.
2. **The loop guard and the thread budgets.** A send past `max_hops` is refused as a loop stop;
   one past its thread's budgets as a budget stop. Either is recorded, then raised.
3. **Routing.** A direct message to a local AID reserves its place in the recipient's mailbox, takes
   its inbox `seq` and is published on the AID's inbox topic; a group message takes the group's
   next `seq` and is published on the group's topic. With a directory (a distributed worker),
   AIDs and groups held by other processes are published to, or kept for them while they are away.
   With an outbound route (a gateway agent), what this runtime cannot deliver goes out (see
   `aun_runtime._route`); without one, it is a dead letter.

The message is archived as sent once it has its `seq`, before the publish: a reader of the
archive never sees a delivery whose sending is missing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from autogen_core import AgentRuntime

from protocols.aun import (
    AUNMessage,
    Mention,
    ToolCallPayload,
    ToolResultPayload,
    aid_domain,
    new_message_id,
    validate_aid,
    validate_message_id,
)

from ._acting import INBOUND
from ._archive import Archive, RecordKind
from ._budgets import BudgetLedger
from ._core import agent_id, group_topic, inbox_topic
from ._directory import AIDStatus, Directory
from ._endpoint import Endpoint
from ._errors import (
    HopLimitExceeded,
    MailboxFullError,
    NoRouteError,
    NotAGroupMemberError,
    ThreadBudgetExceeded,
    UndeliverableError,
    UnknownAIDError,
    UnknownGroupError,
)
from ._failures import FailureLog
from ._groups import GroupState
from ._mailbox import Mailbox, OverflowPolicy
from ._payload import PayloadLike, coerce_payload
from ._route import OutboundRoute, send_copy_out, send_out

__all__ = ["SendPath"]

logger = logging.getLogger("aun_runtime")

#: Payloads that annotate the sender's own tool use: not replies, so not counted as unaddressed ones.
_ANNOTATIONS = (ToolCallPayload, ToolResultPayload)


class SendPath:
    """Sends messages for the local AIDs of one runtime.

    Args:
        archive: where sent messages and failures are recorded.
        core: the autogen-core runtime that carries the publishes.
        ledger: the budget ledger that admits replies.
        failures: where refusals are recorded.
        endpoints: the runtime's local AIDs (shared, not copied: registration adds to it).
        groups: the runtime's own groups (shared, likewise).
        directory: AIDs and groups held by other processes, or None.
        domain: the local domain.
        max_hops: the loop guard's hop limit per thread.
        core_drains: whether the core enforces mailboxes itself (a group publish then waits in it).
    """

    def __init__(
        self,
        *,
        archive: Archive,
        core: AgentRuntime,
        ledger: BudgetLedger,
        failures: FailureLog,
        endpoints: Mapping[str, Endpoint],
        groups: Mapping[str, GroupState],
        directory: Directory | None,
        domain: str,
        max_hops: int,
        core_drains: bool,
    ) -> None:
        self.archive = archive
        self.core = core
        self.ledger = ledger
        self.failures = failures
        self.endpoints = endpoints
        self.groups = groups
        self.directory = directory
        self.domain = domain
        self.max_hops = max_hops
        self.core_drains = core_drains
        #: Where what cannot be delivered here goes (a gateway agent), or None for dead letters.
        self.outbound: OutboundRoute | None = None
        #: Group members already warned about as registered nowhere (one warning per AID).
        self._warned_absent: set[str] = set()

    async def send(
        self,
        sender: str,
        payload: PayloadLike,
        *,
        to: str | None = None,
        group_id: str | None = None,
        mentions: Sequence[str | Mention] | None = None,
        in_reply_to: AUNMessage | str | None = None,
        message_id: str | None = None,
    ) -> AUNMessage:
        """Send as `sender`: to `to`, or to `group_id`. See the module docstring."""
        inbound = INBOUND.get()
        cause = (
            inbound if inbound is not None else in_reply_to if isinstance(in_reply_to, AUNMessage) else None
        )
        message_id = new_message_id() if message_id is None else validate_message_id(message_id)
        if cause is None:
            thread, hops = message_id, 0
        else:
            thread, hops = cause.thread or cause.message_id, cause.hops + 1
        directory = self.directory
        group = self.groups.get(group_id) if group_id is not None else None
        mode = group.dispatch_mode if group is not None else None
        if group_id is not None and directory is not None:
            info = directory.group(group_id)
            mode = info.dispatch_mode if info is not None else None
        # The message is built once, when its seq is known; until then it is these fields.
        fields: dict[str, Any] = {
            "message_id": message_id,
            "from_aid": sender,
            "to": to,
            "group_id": group_id,
            "payload": coerce_payload(payload, mentions),
            "in_reply_to": in_reply_to.message_id if isinstance(in_reply_to, AUNMessage) else in_reply_to,
            "thread": thread,
            "hops": hops,
            "dispatch_mode": mode,
        }
        if hops > self.max_hops:
            error = HopLimitExceeded(thread, hops, self.max_hops)
            self.failures.loop_stop(sender, error, AUNMessage(**fields))
            raise error
        if cause is not None:  # a first message starts a thread: nothing to count yet
            refusal = self.ledger.admit_reply(
                sender, cause, annotation=type(fields["payload"]) in _ANNOTATIONS
            )
            if refusal is not None:
                budget_error = ThreadBudgetExceeded(refusal)
                self.failures.budget_stop(sender, budget_error, AUNMessage(**fields))
                raise budget_error
        if group_id is not None and directory is not None:
            message = await self._publish_to_members(group_id, fields, directory)
        elif group_id is not None:
            message = await self._publish_to_group(group_id, fields)
        else:
            # A registered AID was validated when it was registered.
            target = to if to is not None and to in self.endpoints else validate_aid(to or "")
            message = await self._publish_direct(target, fields)
        self.failures.stats.sent += 1
        return message

    def held_elsewhere(self, aid: str) -> bool:
        """True if another process of this cluster holds (or held) `aid`: it is not the network's."""
        return self.directory is not None and self.directory.aid_status(aid) is not AIDStatus.UNKNOWN

    def no_agent(self, aid: str) -> UndeliverableError:
        """The error for a message to `aid` when nobody here (or on a route) can take it."""
        if aid_domain(aid) == self.domain:
            return UnknownAIDError(f"no agent {aid} is registered in this runtime")
        return NoRouteError(f"no gateway route to {aid}: it is outside the local domain {self.domain!r}")

    # -- direct messages ---------------------------------------------------------------------------

    async def _publish_direct(self, to: str, fields: dict[str, Any]) -> AUNMessage:
        target = self.endpoints.get(to)
        if target is None and self.outbound is not None and not self.held_elsewhere(to):
            return await send_out(self.outbound, AUNMessage(**fields), to, self.archive, self.failures)
        if target is None and self.directory is not None:
            return await self._publish_remote(to, AUNMessage(**fields), self.directory)
        if target is None:
            raise self.failures.refused(AUNMessage(**fields), self.no_agent(to))
        message_id = fields["message_id"]
        try:
            if not target.mailbox.try_reserve(message_id):
                await target.mailbox.reserve(message_id, fields["from_aid"])
        except MailboxFullError as exc:
            raise self.failures.refused(AUNMessage(**fields), MailboxFullError(f"{to}: {exc}")) from None
        try:
            # The inbox position is taken only now, after any wait for room: seq follows arrival order.
            message = AUNMessage.assemble(**fields, seq=target.next_seq())
            self.archive.record(message.from_aid, RecordKind.SENT, message)
            # The sender is left out on purpose: the core never delivers a publish back to its sender,
            # and an agent may well write to itself.
            await self.core.publish_message(message, inbox_topic(to), message_id=message_id)
        except BaseException:
            target.mailbox.cancel_reservation(message_id)
            raise
        return message

    async def _publish_remote(self, to: str, message: AUNMessage, directory: Directory) -> AUNMessage:
        """A direct message to an AID this process does not hold, with a directory to ask."""
        status = directory.aid_status(to)
        if status is AIDStatus.UNKNOWN and (aid_domain(to) != self.domain or not directory.keeps_undeliverable):
            raise self.failures.refused(message, self.no_agent(to))
        if status is not AIDStatus.UNKNOWN:  # held, or away: kept for it until it is back
            self.archive.record(message.from_aid, RecordKind.SENT, message)
        await self.core.publish_message(message, inbox_topic(to), message_id=message.message_id)
        if status is AIDStatus.UNKNOWN:
            raise self.failures.refused(
                message,
                UnknownAIDError(
                    f"no worker holds {to}: the message is kept and will be delivered if a worker registers it"
                ),
            )
        return message

    # -- group messages ----------------------------------------------------------------------------

    def _refuse_outsider(self, sender: str, group_id: str, message: AUNMessage) -> NoReturn:
        """A post from outside the group: the sender's dead letter, and its error."""
        error = NotAGroupMemberError(f"{sender} is not a member of group {group_id}")
        self.failures.dead_letter(sender, message, error)
        raise error

    async def _publish_to_group(self, group_id: str, fields: dict[str, Any]) -> AUNMessage:
        group = self.groups.get(group_id)
        sender = fields["from_aid"]
        if group is None and self.outbound is not None:
            return await send_out(self.outbound, AUNMessage(**fields), None, self.archive, self.failures)
        if group is None:
            raise self.failures.refused(
                AUNMessage(**fields), UnknownGroupError(f"no group {group_id!r} in this runtime")
            )
        if sender not in group.members:
            self._refuse_outsider(sender, group_id, AUNMessage(**fields))
        message_id = fields["message_id"]
        reserved: list[Mailbox] = []
        absent: list[str] = []
        drains = self.core_drains
        for aid in group.members:
            endpoint = self.endpoints.get(aid)
            if aid == sender:
                continue
            if endpoint is None:
                absent.append(aid)
                continue
            # A group message reaches every member alike, so a full mailbox cannot refuse its copy
            # here: under ``block`` the sender waits for room; otherwise arrival decides. A core that
            # drains mailboxes makes the publish itself wait for room, in the same first-come order.
            if not drains and endpoint.mailbox.overflow is OverflowPolicy.BLOCK:
                with contextlib.suppress(MailboxFullError):
                    await endpoint.mailbox.reserve(message_id, sender)
                    reserved.append(endpoint.mailbox)
        try:
            # Its place in the group is taken only now: seq follows publish order, and membership
            # spans are measured in it.
            message = AUNMessage.assemble(**fields, seq=group.next_seq())
            self.archive.record(sender, RecordKind.SENT, message)
            core_sender = agent_id(sender) if sender in self.endpoints else None
            await self.core.publish_message(
                message, group_topic(group_id), sender=core_sender, message_id=message_id
            )
        except BaseException:
            for mailbox in reserved:
                mailbox.cancel_reservation(message_id)
            raise
        for aid in absent:  # members with no agent here: their copies go out, or are dead letters
            await self._copy_for_absent(group_id, message, aid)
        return message

    async def _publish_to_members(self, group_id: str, fields: dict[str, Any], directory: Directory) -> AUNMessage:
        """A group message through a directory: one copy to each member the sender sees now.

        Members held here or by another process (or away) get their copy; a member nobody holds
        gets a dead letter instead, as in one process.
        """
        info = directory.group(group_id)
        sender = fields["from_aid"]
        message = AUNMessage(**fields)
        if info is None and self.outbound is not None:
            return await send_out(self.outbound, message, None, self.archive, self.failures)
        if info is None:
            raise self.failures.refused(message, UnknownGroupError(f"no group {group_id!r}"))
        if sender not in info.members:
            self._refuse_outsider(sender, group_id, message)
        reserved: list[tuple[str, Mailbox]] = []
        for aid in sorted(info.members - {sender}):
            endpoint = self.endpoints.get(aid)
            if endpoint is not None and endpoint.mailbox.overflow is OverflowPolicy.BLOCK:
                with contextlib.suppress(MailboxFullError):
                    await endpoint.mailbox.reserve(message.message_id, sender)
                    reserved.append((aid, endpoint.mailbox))
        # Membership may have changed while waiting for room: the members seen now receive it.
        info = directory.group(group_id) or info
        for aid, mailbox in reserved:
            if aid not in info.members:
                mailbox.cancel_reservation(message.message_id)
        self.archive.record(sender, RecordKind.SENT, message)
        core_sender = agent_id(sender) if sender in self.endpoints else None
        for aid in sorted(info.members - {sender}):
            if aid not in self.endpoints and directory.aid_status(aid) is AIDStatus.UNKNOWN:
                await self._copy_for_absent(group_id, message, aid)
                continue
            await self.core.publish_message(message, inbox_topic(aid), sender=core_sender, message_id=message.message_id)
        return message

    async def _copy_for_absent(self, group_id: str, message: AUNMessage, aid: str) -> None:
        """The copy of a group message for a member nobody here holds: out through the route, or a
        dead letter."""
        if self.outbound is not None:
            await send_copy_out(self.outbound, message, aid, self.failures)
            return
        self._warn_if_absent(group_id, aid)
        self.failures.dead_letter(aid, message, self.no_agent(aid))

    def _warn_if_absent(self, group_id: str, aid: str) -> None:
        """Say so, once per AID, when a post to a group meets a local-domain member registered nowhere.

        Said at the first post rather than when the member is added: registering an agent after the
        group that names it is legitimate (it receives what is posted from then on). A member of
        another domain, any member while a gateway route is set, and one another process of the
        cluster holds are reached elsewhere, so they are never warned about.
        """
        if (
            aid in self.endpoints
            or aid in self._warned_absent
            or aid_domain(aid) != self.domain
            or self.outbound is not None
            or self.held_elsewhere(aid)
        ):
            return
        self._warned_absent.add(aid)
        logger.warning(
            "group %s: member %s is not registered: its copies of group messages are dead letters until "
            "an agent with that AID is registered (register_agent(%r, ...) before posting, or check the "
            "AID for a typo)",
            group_id, aid, aid,
        )
