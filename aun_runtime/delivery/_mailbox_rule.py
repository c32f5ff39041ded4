"""The mailbox rule: who admits a message to an agent's mailbox and takes its turns, said once.

Every core holds each agent to one message at a time, in arrival order, within its mailbox's
bound and policy; cores differ only in *who* does it. A core that drains mailboxes itself
([`AUNCore.drains_mailboxes`][aun_runtime.AUNCore.drains_mailboxes], the actor core) admits each
publish to the recipient's mailbox, making its publisher wait for room, and runs the agent's
messages one at a time; any other core hands every message over at once, and delivery applies
the mailbox instead. The runtime picks one `MailboxRule` for its core when it is made
(`mailbox_rule`); the agent, its endpoint, the group
fan-out, the send path and the facade ask that rule, and none of them asks which kind of core it is.

Places before a publish are held through the rule too: a direct message reserves its place in the
recipient's mailbox on either kind of core (`hold_place_for_direct`: a fast sender waits for a slow
receiver under `block`, or is refused under `dead_letter`), a group copy only where delivery
applies the mailbox (`hold_place_for_copy`: a draining core makes the publish itself wait), and
a place held for a message that is not published after all is given back with `give_back`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeAlias

from autogen_core import MessageContext

from protocols.aun import AUNMessage

from ..base._errors import MailboxFullError
from ._mailbox import Mailbox, OverflowPolicy

__all__ = ["CoreDrainsMailboxes", "DeliveryAppliesMailboxes", "Dispatch", "MailboxRule", "Recipient", "mailbox_rule"]

#: An agent instance's handler entry: runs the matching ``@event`` handler for one admitted message.
Dispatch: TypeAlias = Callable[[Any, MessageContext], Coroutine[Any, Any, None]]


class Recipient(Protocol):
    """What the rule needs of the local AID a message arrives for (an `Endpoint`)."""

    @property
    def mailbox(self) -> Mailbox: ...

    def handle(self, dispatch: Dispatch, message: Any, ctx: MessageContext) -> Coroutine[Any, Any, None]:
        """Membership, channel and handler, for a message whose turn it is (a coroutine to await)."""
        ...

    def refused_as_full(self, message: AUNMessage | None) -> None:
        """The mailbox refused the message: record its dead letter."""
        ...


class MailboxRule(Protocol):
    """What a runtime does with mailboxes, given who drains them."""

    #: Whether a group copy may hold a place before its publish (`hold_place_for_copy`): False
    #: lets the fan-out skip asking for every member of every post.
    holds_places_for_copies: bool

    def deliver(
        self, endpoint: Recipient, dispatch: Dispatch, message: Any, ctx: MessageContext
    ) -> Coroutine[Any, Any, None]:
        """Hand a message that arrived for `endpoint` to its agent's `dispatch` (a coroutine to await)."""
        ...

    def hold_place_for_direct(self, mailbox: Mailbox, message_id: str, sender: str) -> Awaitable[None] | None:
        """Before a direct message is published to `mailbox`: reserve its place. None when it is
        reserved at once (the usual case, no coroutine); else an awaitable that waits for room and
        raises `MailboxFullError` if none comes (or the policy refuses at once)."""
        ...

    async def hold_place_for_copy(self, mailbox: Mailbox, message_id: str, sender: str) -> bool:
        """Before a group copy is published to `mailbox`: wait for its place if this rule waits at
        the sender. True if a place is now reserved (give it back if the copy is not published)."""
        ...

    def give_back(self, mailbox: Mailbox, message_id: str) -> None:
        """A place held for `message_id` before its publish: the message was not published after all."""
        ...

    def undelivered(self, mailbox: Mailbox, message_id: str) -> None:
        """The core could not deliver `message_id` to `mailbox`'s agent: free what was held for it."""
        ...


class _DirectPlaces:
    """What both rules do alike: a direct message reserves its place before it is published."""

    def hold_place_for_direct(self, mailbox: Mailbox, message_id: str, sender: str) -> Awaitable[None] | None:
        if mailbox.try_reserve(message_id):
            return None
        return mailbox.reserve(message_id, sender)

    def give_back(self, mailbox: Mailbox, message_id: str) -> None:
        mailbox.cancel_reservation(message_id)


class CoreDrainsMailboxes(_DirectPlaces):
    """The core admits every message to the mailbox and takes the turns: delivery only handles."""

    holds_places_for_copies = False

    def deliver(
        self, endpoint: Recipient, dispatch: Dispatch, message: Any, ctx: MessageContext
    ) -> Coroutine[Any, Any, None]:
        # The endpoint's own coroutine, not one around it: a frame less on every delivery.
        return endpoint.handle(dispatch, message, ctx)

    async def hold_place_for_copy(self, mailbox: Mailbox, message_id: str, sender: str) -> bool:
        return False  # the core makes the publish itself wait for room, in the same first-come order

    def undelivered(self, mailbox: Mailbox, message_id: str) -> None:
        return None  # the core took the place back itself


class DeliveryAppliesMailboxes(_DirectPlaces):
    """The core hands messages over at once: delivery admits them and takes turns, and a sender
    under `block` waits for room before it publishes."""

    holds_places_for_copies = True

    def deliver(
        self, endpoint: Recipient, dispatch: Dispatch, message: Any, ctx: MessageContext
    ) -> Coroutine[Any, Any, None]:
        return self._deliver(endpoint, dispatch, message, ctx)

    async def _deliver(self, endpoint: Recipient, dispatch: Dispatch, message: Any, ctx: MessageContext) -> None:
        is_envelope = isinstance(message, AUNMessage)
        message_id = message.message_id if is_envelope else (ctx.message_id or "")
        mailbox = endpoint.mailbox
        if not mailbox.arrive(message_id):
            endpoint.refused_as_full(message if is_envelope else None)
            return
        try:
            if mailbox.begin_turn_now():  # nobody before it: handled here, two coroutines fewer
                try:
                    await endpoint.handle(dispatch, message, ctx)
                finally:
                    mailbox.end_turn()
            else:
                await mailbox.take_turn(_handled(endpoint, dispatch, message, ctx))
        finally:
            mailbox.release()

    async def hold_place_for_copy(self, mailbox: Mailbox, message_id: str, sender: str) -> bool:
        # A group message reaches every member alike, so a full mailbox cannot refuse its copy
        # here: under ``block`` the sender waits for room; otherwise arrival decides.
        if mailbox.overflow is not OverflowPolicy.BLOCK:
            return False
        with contextlib.suppress(MailboxFullError):
            await mailbox.reserve(message_id, sender)
            return True
        return False  # waited block_timeout in vain: arrival decides (over the bound, counted)

    def undelivered(self, mailbox: Mailbox, message_id: str) -> None:
        mailbox.cancel_reservation(message_id)  # it will never arrive


async def _handled(endpoint: Recipient, dispatch: Dispatch, message: Any, ctx: MessageContext) -> None:
    # The endpoint's checks run when the turn comes, not when the message arrives.
    await endpoint.handle(dispatch, message, ctx)


def mailbox_rule(core_drains: bool) -> MailboxRule:
    """The rule for a core that drains mailboxes itself, or for one that does not."""
    return CoreDrainsMailboxes() if core_drains else DeliveryAppliesMailboxes()
