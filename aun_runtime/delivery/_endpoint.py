"""What the AUN runtime keeps for one local AID, kept small enough for a million idle ones.

An `Endpoint` holds the AID's mailbox (its bound and policy, whichever core enforces them),
its inbox sequence, its description and card, and its channel.

The mailbox is made on first use (a message on its way, or someone asking for it), and dropped
again when a core that drains mailboxes lets go of it (the agent was evicted with nothing pending)
while it is at rest: only its counts (`high_water`, `overflowed`) are kept, in the slot the mailbox
took, and the next mailbox starts from them. So an AID that was never addressed, or is idle,
carries no mailbox, and the counts the runtime reports survive.

The channel's dedup window is the only part that grows with traffic, so it follows the agent's life:

* while the agent has an instance, the window lives in its `Channel`;
* when the instance is evicted, a short window (up to `PARKED_WINDOW_KEYS` keys) is parked
  as a tuple, and a long one is dropped: the archive holds every key, and the channel reads the
  newest ones back when the agent is next active;
* an AID that never had a channel in a runtime whose archive started empty needs no archive read:
  nothing can be there for it.

The endpoint delivers to whatever agent instance the AID has now: the agent hands it its dispatch
(`endpoint.handle(agent._dispatch, ...)`), so the endpoint knows nothing of agent classes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeAlias

from autogen_core import MessageContext

from protocols.aun import AUNMessage

from ..base._errors import MailboxFullError, RuntimeStoppedError
from ._channel import Admission, Channel
from ._mailbox import Mailbox
from ._mailbox_rule import Dispatch

if TYPE_CHECKING:
    from ..base._agent_md import AgentCard
    from ._agent_host import AgentHost

__all__ = ["PARKED_WINDOW_KEYS", "Endpoint"]

#: Dedup keys an evicted agent keeps in memory (about 150 bytes each). An agent idle after a short
#: exchange keeps its whole window and needs no archive read to come back; a busy one's long
#: window is dropped and read back from the archive.
PARKED_WINDOW_KEYS = 16

_Key: TypeAlias = tuple[str, str]
# A parked window is one string, "sender<US>id<RS>sender<US>id...": one object instead of a tuple
# of tuples of strings. AIDs cannot hold these control characters; a message id holding one is
# not packed (the window is then read back from the archive).
_UNIT = "\x1f"
_RECORD = "\x1e"

#: A dropped mailbox's counts are kept as one int, `high_water + (overflowed << _MARK_SHIFT)`: small
#: ones (an AID that had a message or two) are ints Python shares, so they cost nothing.
_MARK_SHIFT = 32


async def _nothing() -> None:
    """What a delivery that reaches no handler awaits."""


def _pack(keys: tuple[_Key, ...]) -> str | None:
    parts = []
    for sender, message_id in keys:
        if _UNIT in message_id or _RECORD in message_id:
            return None
        parts.append(sender + _UNIT + message_id)
    return _RECORD.join(parts)


def _unpack(packed: str) -> list[_Key]:
    if not packed:
        return []
    keys: list[_Key] = []
    for part in packed.split(_RECORD):
        sender, _, message_id = part.partition(_UNIT)
        keys.append((sender, message_id))
    return keys


class Endpoint:
    """Everything the runtime keeps for one local AID: mailbox, channel, inbox sequence."""

    __slots__ = (
        "_channel",
        "_mailbox",
        "_parked",
        "_reload",
        "aid",
        "card",
        "description",
        "eager",
        "handler_timeout",
        "last_seq",
        "receipts",
        "runtime",
    )

    def __init__(
        self,
        runtime: AgentHost,
        aid: str,
        description: str,
        eager: bool,
        *,
        reload: bool,
        handler_timeout: float | None,
    ) -> None:
        self.runtime = runtime
        self.aid = aid
        # The mailbox, or while there is none the counts of the last one (see the module docstring).
        self._mailbox: Mailbox | int = 0
        self.description = description
        self.eager = eager
        #: Seconds one turn of this agent may run (None: no limit); see `aun_runtime.delivery._turns`.
        self.handler_timeout = handler_timeout
        self.card: AgentCard | None = None
        self.last_seq = 0  # the inbox position of the last direct message
        # (sender, message_id) -> resolved once the channel has archived its verdict on that message
        # (or it became a dead letter): how a bridge knows it may acknowledge it to the network.
        # Bounded by the mailbox: each entry belongs to a message holding a place in it. None until
        # a bridge first waits on this AID, so idle AIDs carry no empty dict.
        self.receipts: dict[tuple[str, str], asyncio.Future[None]] | None = None
        self._channel: Channel | None = None
        self._parked: str | None = None  # the window of an evicted agent, if short, packed
        self._reload = reload  # read the window from the archive? (not if it started empty)

    @property
    def waiting(self) -> int:
        """Messages its mailbox holds now (0 without a mailbox: it is made on first use)."""
        mailbox = self._mailbox
        return mailbox.occupancy if isinstance(mailbox, Mailbox) else 0

    @property
    def mailbox(self) -> Mailbox:
        """The AID's mailbox (made now if it has none: it is made on first use)."""
        mailbox = self._mailbox
        if isinstance(mailbox, Mailbox):
            return mailbox
        made = self.runtime.mailbox_options.mailbox(owner=self.aid)
        made.high_water = mailbox & ((1 << _MARK_SHIFT) - 1)
        made.overflowed = mailbox >> _MARK_SHIFT
        self._mailbox = made
        return made

    @property
    def occupancy(self) -> int:
        """Messages the mailbox holds now (0 if it has none), without making one."""
        mailbox = self._mailbox
        return mailbox.occupancy if isinstance(mailbox, Mailbox) else 0

    def mailbox_released(self, mailbox: Mailbox) -> None:
        """The core holds `mailbox` no longer: drop it if it is this AID's and at rest, keeping its counts."""
        if mailbox is self._mailbox and mailbox.at_rest:
            self._mailbox = mailbox.high_water + (mailbox.overflowed << _MARK_SHIFT)

    def next_seq(self) -> int:
        self.last_seq += 1
        return self.last_seq

    @property
    def channel(self) -> Channel:
        if self._channel is None:
            runtime = self.runtime
            if self._parked is not None:
                seed: list[_Key] | None = _unpack(self._parked)
            else:
                seed = None if self._reload else []
            self._channel = Channel(self.aid, runtime.archive, runtime.dedup_window, seed=seed)
            self._parked = None
        return self._channel

    def park_channel(self) -> None:
        """The agent's instance is going away: keep its dedup window small, or leave it to the archive."""
        channel, self._channel = self._channel, None
        if channel is None:
            return
        keys = channel.keys()
        packed = _pack(keys) if len(keys) <= PARKED_WINDOW_KEYS else None
        if packed is not None:
            self._parked = packed
        else:
            self._reload = True

    async def deliver(self, dispatch: Dispatch, message: Any, ctx: MessageContext) -> None:
        """Hand one arriving message to the agent's `dispatch`: mailbox, membership, channel, handler.

        The runtime's mailbox rule (`aun_runtime.delivery._mailbox_rule`) says who admits it to the mailbox
        and takes the turns: the core, or this delivery.
        """
        await self.runtime.mailbox_rule.deliver(self, dispatch, message, ctx)

    def refused_as_full(self, message: AUNMessage | None) -> None:
        """The mailbox refused an arriving message (full, `dead_letter` policy): a dead letter."""
        self.runtime.record_dead_letter(self.aid, message, MailboxFullError("mailbox full"))
        if self.receipts and message is not None:
            self._settle_receipt(message)

    def handle(self, dispatch: Dispatch, message: Any, ctx: MessageContext) -> Coroutine[Any, Any, None]:
        """Membership, channel and handler for a message whose turn it is: the coroutine to await.

        The checks run now and what is returned is the handler's own coroutine (or one that does
        nothing), not one around it: a frame less on every delivery.

        While the runtime stops, the message waits instead (it is no turn in flight): the core's stop
        cancels the wait, or, on a core that does not, it becomes a dead letter once the core stopped.
        """
        runtime = self.runtime
        if runtime.turns.closing:
            return self._handle_once_released(dispatch, message, ctx)
        if not isinstance(message, AUNMessage):  # a raw autogen-core publish: no envelope, so no channel
            return dispatch(message, ctx)
        group_id = message.group_id
        if group_id is not None and message.seq is not None and not runtime.was_member(group_id, self.aid, message.seq):
            if self.receipts:
                self._settle_receipt(message)
            return _nothing()  # posted while this agent was not in the group: never its message
        verdict = (self._channel or self.channel).admit(message)
        if self.receipts:
            self._settle_receipt(message)
        stats = runtime.stats
        if verdict is Admission.DELIVER:
            stats.delivered += 1
            return dispatch(message, ctx)
        if verdict is Admission.FILTERED:
            stats.filtered += 1
        else:
            stats.duplicates += 1
        return _nothing()

    async def _handle_once_released(self, dispatch: Dispatch, message: Any, ctx: MessageContext) -> None:
        runtime = self.runtime
        try:
            await runtime.turns.held()
        except RuntimeStoppedError as exc:
            runtime.record_dead_letter(self.aid, message if isinstance(message, AUNMessage) else None, exc)
            return
        await self.handle(dispatch, message, ctx)

    def _settle_receipt(self, message: AUNMessage) -> None:
        future = self.receipts.pop((message.from_aid, message.message_id), None) if self.receipts else None
        if future is not None and not future.done():
            future.set_result(None)

