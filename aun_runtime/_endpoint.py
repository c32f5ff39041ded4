"""The endpoint of one local AID: its mailbox, its channel, and the delivery path through them."""

from __future__ import annotations

import asyncio
import itertools
from typing import TYPE_CHECKING, Any

from autogen_core import MessageContext

from protocols.aun import AUNMessage

from ._agent import AUNAgent
from ._channel import Admission, Channel
from ._errors import MailboxFullError
from ._mailbox import Mailbox
from .agentmd import AgentCard

if TYPE_CHECKING:
    from ._runtime import AUNRuntime

__all__ = ["Endpoint"]


class Endpoint:
    """Everything the runtime keeps for one local AID: mailbox, channel, inbox sequence."""

    __slots__ = ("_channel", "aid", "card", "description", "eager", "mailbox", "receipts", "runtime", "seq")

    def __init__(
        self, runtime: AUNRuntime, aid: str, mailbox: Mailbox, description: str, eager: bool
    ) -> None:
        self.runtime = runtime
        self.aid = aid
        self.mailbox = mailbox
        self.description = description
        self.eager = eager
        self.card: AgentCard | None = None
        self.seq = itertools.count(1)
        # (sender, message_id) -> resolved once the channel has archived its verdict on that message
        # (or it became a dead letter): how a bridge knows it may acknowledge it to the network.
        # Bounded by the mailbox: each entry belongs to a message holding a place in it.
        self.receipts: dict[tuple[str, str], asyncio.Future[None]] = {}
        self._channel: Channel | None = None

    @property
    def channel(self) -> Channel:
        # Created on first use: it reads the archive to recognise redeliveries across restarts.
        if self._channel is None:
            self._channel = Channel(self.aid, self.runtime.archive, self.runtime.dedup_window)
        return self._channel

    async def deliver(self, agent: AUNAgent, message: Any, ctx: MessageContext) -> None:
        runtime = self.runtime
        is_envelope = isinstance(message, AUNMessage)
        message_id = message.message_id if is_envelope else (ctx.message_id or "")
        mailbox = self.mailbox
        if not mailbox.arrive(message_id):
            runtime._dead_letter(self.aid, message if is_envelope else None, MailboxFullError("mailbox full"))
            if self.receipts and is_envelope:
                self._settle_receipt(message)
            return
        try:
            if not is_envelope:  # a raw autogen-core publish: no envelope, so no channel
                await mailbox.take_turn(agent._dispatch(message, ctx))
            else:
                await mailbox.take_turn(self._admit(agent, message, ctx))
        finally:
            mailbox.release()

    async def _admit(self, agent: AUNAgent, message: AUNMessage, ctx: MessageContext) -> None:
        runtime = self.runtime
        if message.group_id is not None and not runtime._was_member(message, self.aid):
            if self.receipts:
                self._settle_receipt(message)
            return  # posted while this agent was not in the group: never its message
        verdict = self.channel.admit(message)
        if self.receipts:
            self._settle_receipt(message)
        stats = runtime.stats
        if verdict is Admission.DELIVER:
            stats.delivered += 1
            await agent._dispatch(message, ctx)
        elif verdict is Admission.FILTERED:
            stats.filtered += 1
        else:
            stats.duplicates += 1

    def _settle_receipt(self, message: AUNMessage) -> None:
        future = self.receipts.pop((message.from_aid, message.message_id), None)
        if future is not None and not future.done():
            future.set_result(None)
