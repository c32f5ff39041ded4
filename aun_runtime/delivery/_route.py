"""The network seam: what a runtime hands to a gateway agent, and what it takes from one.

A runtime delivers what it can itself: to AIDs registered in it, and to its own groups. With an
*outbound route* set ([`AUNRuntime.set_outbound_route`][aun_runtime.AUNRuntime.set_outbound_route], normally a gateway agent), the rest
goes out instead of becoming a dead letter:

* a direct message to an AID **not registered in this runtime** (whatever its domain: with a
  gateway, two runtimes usually share the gateway's issuer domain, so "same domain" cannot mean
  "here");
* a group message to a group **this runtime does not hold** (a group on the network);
* the copy of a message in one of this runtime's groups for a member that is not registered here.

Without a route, nothing changes: an unknown AID of the local domain is `UnknownAIDError`, any
other AID `NoRouteError`, an unknown group `UnknownGroupError`, each a dead letter.

The other direction: [`deliver_remote`][aun_runtime.AUNRuntime.deliver_remote] publishes a message that arrived from the network on the
local recipient's topic, and returns only once the recipient's channel has archived its verdict on
it (received, filtered, or recognised as a duplicate) or it became a dead letter, *and* the archive
has committed that record. Acknowledging to the network after that point is what makes a bridge
lose nothing: whatever was acknowledged is on disk here, and whatever was not is sent again and
recognised by the channel's dedup if it was already handled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from autogen_core import AgentRuntime

from protocols.aun import AUNMessage

from ..base._errors import MailboxFullError, UndeliverableError, UnknownAIDError
from ..base._topics import inbox_topic
from ..storage._archive import Archive, RecordKind
from ._endpoint import Endpoint
from ._failures import FailureLog
from ._mailbox import OverflowPolicy

__all__ = ["OutboundRoute", "deliver_remote", "send_copy_out", "send_out"]


@runtime_checkable
class OutboundRoute(Protocol):
    """Where a runtime sends what it cannot deliver itself (a gateway agent implements it)."""

    async def forward(self, message: AUNMessage, recipient: str | None) -> None:
        """Take `message` for the network; return once it is safely queued (not delivered).

        Args:
            message: the message as the sender sent it (`seq` unset: the network numbers it).
            recipient: the AID this copy is for: `message.to` for a direct message, a member for
                the copy of a local group's message; None for a message to a network group.

        Raises:
            UndeliverableError: the route cannot take it (the sender cannot speak on the network,
                the queue is full...); the runtime records a dead letter and tells the sender.
        """
        ...

    async def ping(self, aid: str) -> bool:
        """Whether `aid`, not registered in this runtime, can be reached now (asked, not guessed)."""
        ...


async def send_out(
    route: OutboundRoute, message: AUNMessage, recipient: str | None, archive: Archive, failures: FailureLog
) -> AUNMessage:
    """Hand a direct or network-group message to the route; archive it as sent once it is taken."""
    try:
        await route.forward(message, recipient)
    except UndeliverableError as error:
        raise failures.refused(message, error) from None
    archive.record(message.from_aid, RecordKind.SENT, message)
    return message


async def send_copy_out(route: OutboundRoute, message: AUNMessage, member: str, failures: FailureLog) -> None:
    """Hand one member's copy of a local group message to the route; a refusal is that copy's dead letter."""
    try:
        await route.forward(message, member)
    except UndeliverableError as error:
        failures.dead_letter(member, message, error)


async def deliver_remote(
    arrivals: Sequence[tuple[AUNMessage, str]],
    *,
    endpoints: Mapping[str, Endpoint],
    core: AgentRuntime,
    archive: Archive,
    failures: FailureLog,
) -> None:
    """Publish messages from the network to their local recipients, in order; return once every
    verdict is on disk.

    Args:
        arrivals: `(message, recipient)` pairs in the order the network delivered them (one page).
        endpoints: the runtime's local AIDs.
        core: the core that carries the publishes.
        archive: the runtime's archive, whose commit is awaited.
        failures: where undeliverable arrivals are recorded.

    Backpressure reaches the network: under the `block` policy a full mailbox makes this wait (the
    network keeps what is not yet acknowledged); under `dead_letter` the message is recorded as a
    dead letter at once.

    Raises:
        ArchiveWriteError: the archive could not commit; the messages must not be acknowledged.
    """
    receipts: list[asyncio.Future[None]] = []
    for message, recipient in arrivals:
        receipt = await _publish_remote(message, recipient, endpoints, core, failures)
        if receipt is not None:
            receipts.append(receipt)
    for receipt in receipts:
        await receipt
    await archive.committed()


async def _publish_remote(
    message: AUNMessage, recipient: str, endpoints: Mapping[str, Endpoint], core: AgentRuntime, failures: FailureLog
) -> asyncio.Future[None] | None:
    endpoint = endpoints.get(recipient)
    if endpoint is None:
        failures.dead_letter(recipient, message, UnknownAIDError(f"no agent {recipient} is registered in this runtime"))
        return None
    message_id = message.message_id
    mailbox = endpoint.mailbox
    while True:
        try:
            await mailbox.reserve(message_id)
            break
        except MailboxFullError as exc:
            if mailbox.overflow is OverflowPolicy.DEAD_LETTER:
                failures.dead_letter(recipient, message, MailboxFullError(f"{recipient}: {exc}"))
                return None
            # block: go on waiting; the network holds everything behind this message meanwhile
    key = (message.from_aid, message_id)
    receipts = endpoint.receipts
    if receipts is None:
        receipts = endpoint.receipts = {}
    receipt = receipts.get(key)
    if receipt is None:
        receipt = receipts[key] = asyncio.get_running_loop().create_future()
    try:
        await core.publish_message(message, inbox_topic(recipient), message_id=message_id)
    except BaseException:
        mailbox.cancel_reservation(message_id)
        receipts.pop(key, None)
        raise
    return receipt
