"""`GatewayAgent`: a runtime's agents on the AUN network, with nothing lost and nothing twice.

Each exposed local AID gets an AUN identity, held by the real AUN client (one client and one client
directory per AID). The gateway agent is the runtime's outbound route: what the runtime cannot deliver
itself (an AID not registered in it, a group it does not hold, a local group's member that lives
elsewhere) is committed to the durable outbox and leaves through the sender's own client, in order
per destination. What arrives for an exposed AID is published to it like any local message, and
acknowledged to the network only once its verdict is in the archive on disk.

Guarantee: at least once on the wire (a message is sent until the network has it, and acknowledged
only once recorded here), exactly once at the handler (the receiving channel drops a second delivery
of the same `(sender, message_id)`, also after a restart, and the network stores a resent
`message_id` once).

An example is in the package's docstring ([`aun_runtime.network`][aun_runtime.network]).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from protocols.aun import (
    AUNMessage,
    DispatchMode,
    aid_domain,
    mention_mode_of,
    parse_dispatch_mode,
    validate_aid,
)

from ..base._trace_context import current_traceparent
from ._card import card_text
from ._config import GatewayAgentConfig
from ._errors import GatewayAgentError, NotExposedError
from ._identity import require_client
from ._link import FIRST_CONNECTIONS, STOP_TIMEOUT, AIDLink, LinkState
from ._outbox import Outbox, OutboxItem
from ._thoughts import ThoughtRelay

if TYPE_CHECKING:
    from aun_runtime import AUNRuntime

__all__ = ["GatewayAgent", "GatewayAgentStats"]

log = logging.getLogger("aun_runtime.gateway")

#: How long :meth:`GatewayAgent.ping` waits for each answer from the network, in seconds.
PING_TIMEOUT = 5.0


@dataclass(frozen=True)
class GatewayAgentStats:
    """What went through the gateway agent, all links together."""

    received: int
    refused: int
    sent: int
    retries: int
    dead_letters: int
    waiting: int  #: messages in the outbox, not yet taken by the network
    thoughts: int = 0  #: thoughts the network took (with ``GatewayAgentConfig.thoughts``)
    pages: int = 0  #: pages of arrivals the AUN clients handed over (``received / pages`` per page)


class GatewayAgent:
    """Bridges a runtime's agents to the AUN network (the runtime's outbound route).

    Args:
        runtime: the runtime whose agents it exposes.
        config: where the network is and what to expose (default: from `AUN_GATEWAY_*`).
    """

    def __init__(self, runtime: AUNRuntime, config: GatewayAgentConfig | None = None) -> None:
        self.runtime = runtime
        self.config = config or GatewayAgentConfig.from_env()
        self._links: dict[str, AIDLink] = {}
        self._first_connections = asyncio.Semaphore(FIRST_CONNECTIONS)  # shared by its links
        # Messages found in the outbox whose sender is not exposed (yet): they leave once it is, and
        # stay in the outbox, for a later start, if it never is.
        self._held: dict[str, list[OutboxItem]] = {}
        self._outbox: Outbox | None = None
        self._seed = ""
        self._thoughts: ThoughtRelay | None = None  # only with config.thoughts

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the outbox, give each exposed AID its identity and connection (in the background),
        resume sending what the outbox kept, and become the runtime's outbound route.

        Raises:
            NetworkClientMissingError: the AUN client is not installed (`aun-runtime[gateway]`).
            GatewayAgentError: an AID to expose is not registered in the runtime.
        """
        if self._outbox is not None:
            return
        require_client()
        expose = self.config.expose if self.config.expose is not None else self._unexposed()
        for aid in expose:
            validate_aid(aid)
            if not self.runtime.is_local(aid):
                raise GatewayAgentError(f"cannot expose {aid}: register it in the runtime first")
        self._seed = self.config.key_seed()
        self._outbox = Outbox(self.config.outbox_path, self.config.outbox_capacity)
        for item in self._outbox.take_waiting():
            self._held.setdefault(item.sender, []).append(item)
        if self.config.thoughts:
            self._thoughts = ThoughtRelay(self.runtime.archive, self._links, encrypt=self.config.encrypt)
            self._thoughts.install()
        for aid in expose:
            self._add_link(aid)
        self.runtime.set_outbound_route(self)

    async def stop(self) -> None:
        """Stop carrying messages. What waits in the outbox stays there for the next start.

        Raises:
            GatewayAgentError: a link's tasks had not ended `STOP_TIMEOUT` seconds after being
                cancelled; everything is stopped and closed all the same.
        """
        if self._outbox is None:
            return
        if self.runtime.outbound_route is self:
            self.runtime.set_outbound_route(None)
        if self._thoughts is not None:
            await self._thoughts.uninstall()
            self._thoughts = None
        links = list(self._links.values())
        stopped = await asyncio.gather(*(link.stop() for link in links))
        await self._outbox.close()
        self._outbox = None
        self._links.clear()
        self._held.clear()
        stuck = [link.aid for link, ok in zip(links, stopped, strict=True) if not ok]
        if stuck:
            raise GatewayAgentError(f"{len(stuck)} link(s) did not stop within {STOP_TIMEOUT:.0f} s of being "
                                    f"cancelled (stopped anyway): {', '.join(stuck[:5])}")

    async def __aenter__(self) -> GatewayAgent:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def expose(self, aid: str) -> None:
        """Give one more registered local AID an AUN identity, while running."""
        validate_aid(aid)
        self._require_started()
        if not self.runtime.is_local(aid):
            raise GatewayAgentError(f"cannot expose {aid}: register it in the runtime first")
        if aid not in self._links:
            self._add_link(aid)

    async def expose_registered(self) -> list[str]:
        """With `expose` unset (expose everything), give every AID of the runtime's domain
        registered since the start its identity too. Returns the AIDs added."""
        self._require_started()
        added = self._unexposed() if self.config.expose is None else []
        for aid in added:
            self._add_link(aid)
        for aid, items in self._held.items():
            log.warning("%d message(s) from %s wait in the outbox: it is not exposed, so they stay there", len(items), aid)
        return added

    def _unexposed(self) -> list[str]:
        domain = self.runtime.domain
        return [aid for aid in self.runtime.aids() if aid_domain(aid) == domain and aid not in self._links]

    def _add_link(self, aid: str) -> None:
        assert self._outbox is not None
        deliver = self.runtime.deliver_remote if self._thoughts is None else self._thoughts.deliver(self.runtime.deliver_remote)
        link = AIDLink(aid, self.config, self._seed, self._outbox, deliver, self.runtime.record_dead_letter,
                       card=card_text(self.runtime, aid), first_connections=self._first_connections)
        self._links[aid] = link
        for item in self._held.pop(aid, []):  # what it sent before a restart leaves first
            link.enqueue(item)
        link.start()

    async def wait_connected(self, aids: Iterable[str] | None = None) -> None:
        """Return once every exposed AID (or each of `aids`) has been connected at least once.

        Raises:
            GatewayAgentError: an AID is not exposed, or the network refused its identity.
        """
        links = [self._link(aid) for aid in aids] if aids is not None else list(self._links.values())
        waits = {asyncio.ensure_future(link.wait_connected()): link for link in links}
        try:
            while waits:
                done, _ = await asyncio.wait(waits, timeout=0.5, return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    waits.pop(future)
                failed = [link for link in waits.values() if link.state is LinkState.FAILED]
                if failed:
                    raise GatewayAgentError(f"{failed[0].aid} cannot join the network: {failed[0].error}")
        finally:
            for future in waits:
                future.cancel()

    # -- what the runtime asks of its outbound route -----------------------------------------------

    async def forward(self, message: AUNMessage, recipient: str | None) -> None:
        """Commit `message` to the outbox for the network; it leaves in the background, in order.

        Raises:
            NotExposedError: the sender has no AUN identity here.
            OutboxFullError: too many messages are waiting already.
        """
        link = self._links.get(message.from_aid)
        sender = message.from_aid
        if link is None and self._outbox is not None and self._exposes_all(sender):
            self._add_link(sender)  # exposing everything: an agent registered since the start
            link = self._links[sender]
        if link is None or self._outbox is None:
            raise NotExposedError(
                f"{message.from_aid} is not exposed on the AUN network, so it cannot reach "
                f"{recipient or message.group_id}: add it to GatewayAgentConfig.expose"
            )
        item = await self._outbox.put(message.from_aid, recipient, message, current_traceparent())
        link.enqueue(item)

    def _exposes_all(self, aid: str) -> bool:
        return self.config.expose is None and self.runtime.is_local(aid) and aid_domain(aid) == self.runtime.domain

    async def ping(self, aid: str) -> bool:
        """Whether `aid` can be reached through the network now: a connection of ours answers
        `meta.ping` and the network resolves `aid`'s certificate. The agent behind it may be
        offline: the network keeps messages for it until it connects."""
        validate_aid(aid)
        for link in self._links.values():
            if link.ready and await link.ping_network(PING_TIMEOUT):
                return await link.knows(aid, PING_TIMEOUT)
        return False

    # -- groups on the network ---------------------------------------------------------------------

    async def create_group(
        self,
        name: str,
        *,
        owner: str,
        members: Iterable[str] = (),
        dispatch_mode: DispatchMode | str = DispatchMode.BROADCAST,
    ) -> str:
        """Create a group on the network, owned by exposed `owner`, and return its id.

        The group gets its own AID, `<name>.<issuer>`, the way the AUN client's `create_group`
        makes one: the owner's client makes the group's key pair, the network certifies it, and the
        key and certificate are kept in the owner's AID store (its client directory), beside the
        owner's own, where the owner's client finds them again after a restart. Members (local or
        not) are added by the owner; every member's agents then post to it by its id with
        `group_send`, from any runtime, and each receiving channel applies its mode.

        Raises:
            GatewayAgentError: `owner` is not exposed here, or the gateway agent is not started.
            aun_core.errors.AUNError: the network refused the group (a name already taken...).
        """
        mode = parse_dispatch_mode(dispatch_mode)
        link = self._link(owner)
        await link.wait_connected()
        # The client's create_group, not a bare group.create: a bare one leaves the group without a
        # certified AID. The client uses the AID store its own identity was loaded from (the one
        # holding the owner's keys), so the group's key is kept with them.
        created = await link.client.create_group({"group_name": name, "name": name})
        group_id = str(created["group"]["group_id"])
        for member in members:
            if member != owner:
                await self.call(owner, "group.add_member", {"group_id": group_id, "aid": validate_aid(member)})
        if mode is not DispatchMode.BROADCAST:
            await self.call(owner, "group.set_settings", {"group_id": group_id, "settings": {"mention_mode": mention_mode_of(mode)}})
        return group_id

    async def call(self, aid: str, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Call a network method as exposed `aid` once its client is ready (for what the
        runtime does not model: group administration, directory queries...)."""
        link = self._link(aid)
        await link.wait_connected()
        return await link.client.call(method, dict(params or {}))

    # -- inspection --------------------------------------------------------------------------------

    def exposed(self) -> list[str]:
        """The AIDs with an AUN identity here."""
        return list(self._links)

    def states(self) -> dict[str, LinkState]:
        """Where each exposed AID stands with the network."""
        return {aid: link.state for aid, link in self._links.items()}

    @property
    def stats(self) -> GatewayAgentStats:
        links = list(self._links.values())
        return GatewayAgentStats(
            received=sum(link.stats.received for link in links),
            refused=sum(link.stats.refused for link in links),
            sent=sum(link.stats.sent for link in links),
            retries=sum(link.stats.retries for link in links),
            dead_letters=sum(link.stats.dead_letters for link in links),
            waiting=0 if self._outbox is None else len(self._outbox),
            thoughts=0 if self._thoughts is None else self._thoughts.put,
            pages=sum(link.stats.pages for link in links),
        )

    def _link(self, aid: str) -> AIDLink:
        self._require_started()
        link = self._links.get(aid)
        if link is None:
            raise GatewayAgentError(f"{aid} is not exposed by this gateway agent")
        return link

    def _require_started(self) -> None:
        if self._outbox is None:
            raise GatewayAgentError("the gateway agent is not started: use 'async with GatewayAgent(...)' or start()")
