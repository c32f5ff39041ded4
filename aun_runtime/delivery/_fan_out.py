"""Group fan-out: the one place that decides which members get a copy of a post, and gives it to them.

Every group post goes through `GroupFanOut.post`, whatever
holds the group (this runtime, or the cluster's directory):

1. **The group.** One this runtime (or its cluster) does not hold goes to the outbound route as a
   whole when there is one (a group on the network), else it is `UnknownGroupError`. A sender
   outside the group is `NotAGroupMemberError`. Either refusal is the sender's dead letter.
2. **Who gets a copy**: `copy_recipients` (every member but the
   sender). A dispatch mode that picks *which* members get a copy decides it there; the channel
   of each member then decides what it is shown (`aun_runtime.delivery._channel`).
3. **Room.** Under `block`, the sender waits for room in the mailbox of each member held here
   (the mailbox rule says when: `aun_runtime.delivery._mailbox_rule`). Membership may change meanwhile:
   the members seen once there is room get the copy.
4. **The copies.** The post takes the group's next `seq` (where the group numbers its posts), is
   archived once as sent, and each recipient's copy goes where `Placement.where`
   says it lives: published on its inbox topic (here, or elsewhere in the cluster), handed to the
   outbound route (the network), or recorded as that member's dead letter (nowhere).

A copy is published on the member's own inbox topic, as a direct message is, so the core carries
every message the same way and a member receives posts and direct messages in the order they were
sent.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from autogen_core import AgentId

from protocols.aun import AUNMessage, aid_domain

from ..base._errors import NotAGroupMemberError, UnknownGroupError
from ..base._groups import GroupInfo
from ..base._topics import agent_id, inbox_topic
from ..storage._archive import Archive, RecordKind
from ._core_protocol import AUNCore
from ._endpoint import Endpoint
from ._failures import FailureLog
from ._mailbox import Mailbox
from ._mailbox_rule import MailboxRule
from ._placement import IN_CLUSTER, Placement, Where
from ._route import send_copy_out, send_out

__all__ = ["GroupFanOut", "copy_recipients"]

logger = logging.getLogger("aun_runtime")


def copy_recipients(group: GroupInfo, order: Sequence[str], sender: str) -> list[str]:
    """The members of `group` that get a copy of `sender`'s post, in the order they get it.

    `order` is the group's delivery order (`Directory.delivery_order`). Every member but the
    sender, whatever the dispatch mode: `broadcast` and `mention` differ in
    what each member's channel shows, not in who receives (what a member is not shown is archived
    as filtered). A mode that gives copies to some members only decides that here.
    """
    return [aid for aid in order if aid != sender and aid in group.members]


class GroupFanOut:
    """Posts to groups for the local AIDs of one runtime (see the module docstring)."""

    def __init__(
        self,
        *,
        archive: Archive,
        core: AUNCore,
        failures: FailureLog,
        endpoints: Mapping[str, Endpoint],
        placement: Placement,
        mailbox_rule: MailboxRule,
    ) -> None:
        self.archive = archive
        self.core = core
        self.failures = failures
        self.endpoints = endpoints
        self.placement = placement
        self.mailbox_rule = mailbox_rule
        #: Group members already warned about as registered nowhere (one warning per AID).
        self._warned_absent: set[str] = set()

    async def post(self, group_id: str, fields: dict[str, Any], group: GroupInfo | None = None) -> AUNMessage:
        """Post the message `fields` describe to `group_id` (its `seq` still to be taken); `group`
        is the group as the caller just read it, if it did (read again otherwise)."""
        placement = self.placement
        sender = fields["from_aid"]
        if group is None:
            group = placement.group(group_id)
        if group is None:
            message = AUNMessage(**fields)
            if placement.group_where(group_id) is Where.NETWORK:
                return await send_out(placement, message, None, self.archive, self.failures)
            raise self.failures.refused(message, UnknownGroupError(f"no group {group_id!r} in this runtime"))
        if sender not in group.members:
            self._refuse_outsider(sender, group_id, AUNMessage(**fields))
        message_id = fields["message_id"]
        rule = self.mailbox_rule
        reserved: dict[str, Mailbox] = {}
        copies = copy_recipients(group, placement.delivery_order(group_id), sender)
        if rule.holds_places_for_copies:
            for aid in copies:
                endpoint = self.endpoints.get(aid)
                if endpoint is not None and await rule.hold_place_for_copy(endpoint.mailbox, message_id, sender):
                    reserved[aid] = endpoint.mailbox
            # Membership may have changed while waiting for room: the members seen now receive it.
            copies = copy_recipients(placement.group(group_id) or group, placement.delivery_order(group_id), sender)
            for aid in set(reserved) - set(copies):
                rule.give_back(reserved.pop(aid), message_id)
        try:
            # Its place in the group is taken only now: seq follows publish order, and membership
            # spans are measured in it.
            message = AUNMessage.assemble(**fields, seq=placement.next_seq(group_id))
            self.archive.record(sender, RecordKind.SENT, message)
            core_sender = agent_id(sender) if sender in self.endpoints else None
            # The copies the core carries are published together, one call of the core for each run
            # of them between copies that go elsewhere: every copy still leaves in delivery order.
            run: list[str] = []
            for aid in copies:
                where = placement.where(aid)
                if where in IN_CLUSTER:
                    run.append(aid)
                    continue
                if run:
                    await self._publish(message, run, core_sender, message_id, reserved)
                    run = []
                if where is Where.NETWORK:
                    await send_copy_out(placement, message, aid, self.failures)
                else:  # a member nobody holds: its copy is a dead letter
                    self._warn_if_absent(group_id, aid)
                    self.failures.dead_letter(aid, message, placement.no_agent(aid))
            if run:
                await self._publish(message, run, core_sender, message_id, reserved)
        except BaseException:
            for mailbox in reserved.values():  # places held for copies that were never published
                rule.give_back(mailbox, message_id)
            raise
        return message

    async def _publish(
        self, message: AUNMessage, aids: list[str], sender: AgentId | None, message_id: str, reserved: dict[str, Mailbox]
    ) -> None:
        """Publish the copies of `aids`, in that order, in one call of the core."""
        await self.core.publish_copies(message, [inbox_topic(aid) for aid in aids], sender=sender, message_id=message_id)
        if reserved:  # published: their places are the core's now
            for aid in aids:
                reserved.pop(aid, None)

    def _refuse_outsider(self, sender: str, group_id: str, message: AUNMessage) -> NoReturn:
        """A post from outside the group: the sender's dead letter, and its error."""
        error = NotAGroupMemberError(f"{sender} is not a member of group {group_id}")
        self.failures.dead_letter(sender, message, error)
        raise error

    def _warn_if_absent(self, group_id: str, aid: str) -> None:
        """Say so, once per AID, when a post to a group meets a local-domain member registered nowhere.

        Said at the first post rather than when the member is added: registering an agent after the
        group that names it is legitimate (it receives what is posted from then on). A member of
        another domain is reached elsewhere, and one the route or the cluster holds never lives
        nowhere, so neither is warned about.
        """
        if aid in self._warned_absent or aid_domain(aid) != self.placement.domain:
            return
        self._warned_absent.add(aid)
        logger.warning(
            "group %s: member %s is not registered: its copies of group messages are dead letters until "
            "an agent with that AID is registered (register_agent(%r, ...) before posting, or check the "
            "AID for a typo)",
            group_id, aid, aid,
        )
