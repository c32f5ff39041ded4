"""The send path: how a message from a local AID becomes a publish, a copy for the network, or a
refusal with a dead letter.

Every send goes through `SendPath.send`, whether it comes from an agent's send tools or from
code outside any agent:

1. **Thread and hops.** A message sent while a handler runs (or under `acting_on`) continues the
   handled message's thread one hop further; any other starts a thread of its own.
2. **The loop guard and the thread budgets.** A send past `max_hops` is refused as a loop stop;
   one past its thread's budgets as a budget stop. Either is recorded, then raised.
3. **Routing.** A direct message goes where `Placement.where`
   says its recipient lives. Here: it reserves its place in the recipient's mailbox (through the
   mailbox rule, `aun_runtime.delivery._mailbox_rule`), takes its
   inbox `seq` and is published on the AID's inbox topic. Elsewhere in the cluster (or away):
   published on that topic for the process that holds it. On the network: handed to the
   outbound route (see `aun_runtime.delivery._route`). Nowhere: a dead letter (kept, too, by a cluster
   that delivers it once a worker registers the AID). A group message goes to the group fan-out
   (`aun_runtime.delivery._fan_out`), the one place that gives group copies out.

The message is archived as sent once it has its `seq`, before the publish: a reader of the
archive never sees a delivery whose sending is missing.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from protocols.aun import (
    AUNMessage,
    Mention,
    ToolCallPayload,
    ToolResultPayload,
    new_message_id,
    validate_aid,
    validate_message_id,
)

from ..base._budgets import BudgetLedger
from ..base._errors import HopLimitExceeded, MailboxFullError, ThreadBudgetExceeded, UnknownAIDError
from ..base._payload import PayloadLike, coerce_payload
from ..base._topics import inbox_topic
from ..storage._archive import Archive, RecordKind
from ._acting import INBOUND
from ._core_protocol import AUNCore
from ._endpoint import Endpoint
from ._failures import FailureLog
from ._fan_out import GroupFanOut
from ._mailbox_rule import MailboxRule
from ._placement import Placement, Where
from ._route import send_out

__all__ = ["SendPath"]

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
        placement: where AIDs live and who groups' members are.
        max_hops: the loop guard's hop limit per thread.
        mailbox_rule: who admits messages to mailboxes (a group copy may wait for room first).
    """

    def __init__(
        self,
        *,
        archive: Archive,
        core: AUNCore,
        ledger: BudgetLedger,
        failures: FailureLog,
        endpoints: Mapping[str, Endpoint],
        placement: Placement,
        max_hops: int,
        mailbox_rule: MailboxRule,
    ) -> None:
        self.archive = archive
        self.core = core
        self.ledger = ledger
        self.failures = failures
        self.endpoints = endpoints
        self.placement = placement
        self.max_hops = max_hops
        self.mailbox_rule = mailbox_rule
        self.groups = GroupFanOut(
            archive=archive, core=core, failures=failures, endpoints=endpoints, placement=placement,
            mailbox_rule=mailbox_rule,
        )

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
        group = self.placement.group(group_id) if group_id is not None else None
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
            "dispatch_mode": group.dispatch_mode if group is not None else None,
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
        turns = self.failures.turns
        if turns is not None and turns.spans is not None:  # tracing: the recipients' turns are children of this span
            turns.spans.sent(message_id)
        if group_id is not None:
            message = await self.groups.post(group_id, fields, group)
        else:
            # A registered AID was validated when it was registered.
            target = to if to is not None and to in self.endpoints else validate_aid(to or "")
            message = await self._send_direct(target, fields)
        self.failures.stats.sent += 1
        return message

    def _send_direct(self, to: str, fields: dict[str, Any]) -> Coroutine[Any, Any, AUNMessage]:
        # The coroutine that sends, not one around it: a frame less on every direct send.
        if self.placement.where(to) is Where.HERE:
            return self._publish_here(to, fields)
        return self._send_away(to, fields)

    async def _send_away(self, to: str, fields: dict[str, Any]) -> AUNMessage:
        """A direct message to an AID not registered in this runtime."""
        where = self.placement.where(to)
        message = AUNMessage(**fields)
        if where is Where.NETWORK:
            return await send_out(self.placement, message, to, self.archive, self.failures)
        if where is Where.NOWHERE:
            raise self.failures.refused(message, self.placement.no_agent(to))
        # Elsewhere in the cluster, away (kept until it is back), or kept until a worker holds it.
        if where is not Where.KEPT:
            self.archive.record(message.from_aid, RecordKind.SENT, message)
        await self.core.publish_message(message, inbox_topic(to), message_id=message.message_id)
        if where is Where.KEPT:
            raise self.failures.refused(
                message,
                UnknownAIDError(
                    f"no worker holds {to}: the message is kept and will be delivered if a worker registers it"
                ),
            )
        return message

    async def redeliver(self, to: str, message: AUNMessage) -> None:
        """Deliver `message`, as it was, to the local AID `to` once more (a dead letter redriven:
        the caller has taken it out of `to`'s dedup window). Nothing is recorded as sent again."""
        target = self.endpoints[to]
        if not target.mailbox.try_reserve(message.message_id):
            await target.mailbox.reserve(message.message_id, message.from_aid)
        try:
            await self.core.publish_message(message, inbox_topic(to), message_id=message.message_id)
        except BaseException:
            target.mailbox.cancel_reservation(message.message_id)
            raise

    async def _publish_here(self, to: str, fields: dict[str, Any]) -> AUNMessage:
        """A direct message to an AID registered in this runtime."""
        target = self.endpoints[to]
        message_id = fields["message_id"]
        rule = self.mailbox_rule
        waiting = rule.hold_place_for_direct(target.mailbox, message_id, fields["from_aid"])
        if waiting is not None:
            try:
                await waiting
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
            rule.give_back(target.mailbox, message_id)
            raise
        return message
