"""`AgentTable`: the local AIDs of one [`AUNRuntime`][aun_runtime.AUNRuntime] and what it keeps for each.

The facade answers the application; this table holds what registration makes: each AID's
endpoint (its mailbox, channel and card), which AIDs are an application's inbox, and the
core's factory of each agent class. It is apart from the facade because it is one concern with its
own state (the table and the rules of registering into it), and because the core and the
placement read the same table on every delivery: the core asks it for mailboxes and tells it what
could not be delivered, without going through the facade.

The table does not know whether the runtime runs: the facade starts the agents it registers while
running (see `AUNRuntime.register_agent`), and the runtime's lifecycle starts the others.
"""

from __future__ import annotations

from typing import Any, TypeVar

from autogen_core import AgentId, TypeSubscription

from protocols.aun import AUNMessage, validate_aid
from protocols.contract import contract_classes

from ..base._agent_md import AgentCard, parse_agent_md, render_agent_md
from ..base._budgets import BudgetLedger, Budgets
from ..base._errors import AgentRegistrationError, UnknownAIDError
from ..base._topics import TOPIC_SOURCE, agent_id, inbox_topic_type, register_wire_serializers
from ..delivery._acting import run_proactive
from ..delivery._agent_host import AgentHost
from ..delivery._core_protocol import AUNCore
from ..delivery._endpoint import Endpoint
from ..delivery._failures import FailureLog
from ..delivery._mailbox import Mailbox
from ..delivery._mailbox_rule import MailboxRule
from ..delivery._placement import Placement
from ..delivery._turns import RUNTIME_DEFAULT, RuntimeDefault
from ..storage._archive import Archive
from ._agent import AgentFactory, AgentMaker, AUNAgent, class_description
from ._inbox import Inbox

__all__ = ["AgentTable", "check_handler_timeout"]

AgentT = TypeVar("AgentT", bound=AUNAgent)


class AgentTable:
    """The local AIDs of a runtime: their endpoints, registration, and the core's view of them.

    Args:
        host: what each agent and endpoint is given of the runtime (the runtime itself).
        endpoints: the table, shared with the placement and the send path, which read it.
        core: the core that makes the agents and carries their messages.
        placement: told of each registered AID.
        ledger: takes an agent's own budgets.
        failures: records what the core could not deliver.
        mailbox_rule: releases the place a message the core could not deliver held.
        handler_timeout: the runtime's default handler timeout.
    """

    def __init__(
        self,
        host: AgentHost,
        endpoints: dict[str, Endpoint],
        *,
        core: AUNCore,
        placement: Placement,
        ledger: BudgetLedger,
        failures: FailureLog,
        mailbox_rule: MailboxRule,
        handler_timeout: float | None,
    ) -> None:
        self.host = host
        #: The local AIDs in registration order, each with its endpoint.
        self.endpoints = endpoints
        self.core = core
        self.placement = placement
        self.ledger = ledger
        self.failures = failures
        self.mailbox_rule = mailbox_rule
        self.handler_timeout = handler_timeout
        archive: Archive = host.archive
        self.archive = archive
        # A runtime whose archive starts empty knows no AID has history there yet, so a new agent's
        # channel needs no archive read (see Endpoint).
        self._archive_started_empty = archive.count() == 0
        self._inboxes: set[str] = set()
        self._makers: dict[type[AUNAgent], AgentMaker] = {}  # the core's factory of each agent class
        self._serializer_count = 0
        self.register_serializers()
        # The core asks this table for mailboxes, and reports what it could not deliver, to become
        # dead letters.
        core.attach(
            mailbox_provider=self.mailbox_of,
            on_undeliverable=self.undeliverable,
            on_mailbox_released=self.mailbox_released,
        )

    def register_serializers(self) -> None:
        """Register every contract class defined so far, when classes were added since last time."""
        count = len(contract_classes())
        if count != self._serializer_count:
            register_wire_serializers(self.core)
            self._serializer_count = count

    async def register(
        self,
        aid: str,
        factory: type[AUNAgent] | AgentFactory,
        *,
        description: str = "",
        eager: bool | None = None,
        card: AgentCard | str | None = None,
        budgets: Budgets | None = None,
        handler_timeout: float | RuntimeDefault | None = RUNTIME_DEFAULT,
    ) -> Endpoint:
        """Make `aid` a local agent (see `AUNRuntime.register_agent`, whose rules these are) and
        return its endpoint; the agent is not started."""
        validate_aid(aid)
        if aid in self.endpoints:
            raise AgentRegistrationError(f"{aid} is already registered in this runtime")
        if handler_timeout is RUNTIME_DEFAULT:
            handler_timeout = self.handler_timeout
        check_handler_timeout(handler_timeout)
        if card is None and isinstance(factory, type):
            card = getattr(factory, "agent_md", None)
        parsed = parse_agent_md(card) if isinstance(card, str) else card
        if parsed is not None and parsed.aid != aid:
            raise AgentRegistrationError(f"the agent.md given for {aid} describes {parsed.aid}")
        if parsed is not None and not description:
            description = parsed.description
        if isinstance(factory, type):
            if not issubclass(factory, AUNAgent):
                raise AgentRegistrationError(f"{factory.__name__} is not an AUNAgent subclass")
            if eager is None:
                eager = factory.on_start is not AUNAgent.on_start
            if not description:
                description = class_description(factory)
        endpoint = Endpoint(
            self.host, aid, description, bool(eager), reload=not self._archive_started_empty,
            handler_timeout=handler_timeout,
        )
        endpoint.card = parsed
        self.endpoints[aid] = endpoint
        if budgets is not None:
            self.ledger.set_budgets(aid, budgets)
        # Who takes part is archived too, so a reader in another process (a console) can tell agents
        # from inboxes and show their cards.
        self.archive.record_agent(
            aid,
            role="inbox" if factory is Inbox else "agent",
            mode=AUNAgent.mode,
            description=description,
            card=card if isinstance(card, str) else None if parsed is None else render_agent_md(parsed),
        )
        self.register_serializers()  # contract classes imported since the last registration
        await self.core.register_factory(aid, self._maker(factory))
        topic_type = inbox_topic_type(aid)
        # The topic type is unique per AID, so it serves as the id too (no uuid string per AID).
        await self.core.add_subscription(TypeSubscription(topic_type, aid, id=topic_type))
        self.placement.registered(aid)
        return endpoint

    def _maker(self, factory: type[AUNAgent] | AgentFactory) -> AgentMaker:
        """The core's factory for an AID made by `factory`: one per agent class, shared by all its
        AIDs; a factory that is not a class (a lambda, often one per AID) gets one of its own."""
        if not isinstance(factory, type):
            return AgentMaker(factory, self.host, self.endpoints)
        maker = self._makers.get(factory)
        if maker is None:
            maker = self._makers[factory] = AgentMaker(factory, self.host, self.endpoints)
        return maker

    def mark_inbox(self, aid: str) -> None:
        """Note that the registered AID `aid` is an application's inbox, not an agent."""
        self._inboxes.add(aid)

    def is_inbox(self, aid: str) -> bool:
        """True if `aid` was opened as an application's inbox."""
        return aid in self._inboxes

    async def instance(self, aid: str, cls: type[AgentT]) -> AgentT:
        """The local instance of `aid` (created if it was not yet), checked to be a `cls`."""
        if aid not in self.endpoints:
            raise UnknownAIDError(f"{aid} is not registered in this runtime")
        return await self.core.try_get_underlying_agent_instance(agent_id(aid), cls)

    async def start(self, endpoint: Endpoint) -> None:
        """Create the agent of `endpoint` and run its `on_start`."""
        agent = await self.instance(endpoint.aid, AUNAgent)
        # Awaited, not spawned: what agents say first happens in registration order, every run alike.
        await run_proactive(agent, agent.on_start, what="on_start")

    async def start_eager(self) -> None:
        """Start every agent that speaks first, in registration order."""
        for endpoint in list(self.endpoints.values()):
            if endpoint.eager:
                await self.start(endpoint)

    # -- lookups ---------------------------------------------------------------------------------

    def endpoint(self, aid: str) -> Endpoint:
        """The endpoint of the local AID `aid`."""
        endpoint = self.endpoints.get(aid)
        if endpoint is None:
            raise UnknownAIDError(f"{aid} is not registered in this runtime")
        return endpoint

    def is_local(self, aid: str) -> bool:
        """True if `aid` is registered in this runtime."""
        return aid in self.endpoints

    def is_agent(self, aid: str) -> bool:
        """True if `aid` is a local agent (not an application's [`Inbox`][aun_runtime.Inbox])."""
        return aid in self.endpoints and aid not in self._inboxes

    def agent_endpoint(self, aid: str) -> Endpoint | None:
        """The endpoint of `aid` if it is a local agent (not an application's inbox), else None."""
        return None if aid in self._inboxes else self.endpoints.get(aid)

    def handler_timeout_of(self, aid: str) -> float | None:
        """Seconds a turn of the local agent `aid` may run (None: no limit)."""
        return self.endpoint(aid).handler_timeout

    # -- what the core asks and tells (see AUNCore.attach) ---------------------------------------

    def mailbox_of(self, agent: AgentId) -> Mailbox | None:
        """The mailbox of the agent `agent`, if it is one of this table's AIDs."""
        endpoint = self.endpoints.get(agent.type) if agent.key == TOPIC_SOURCE else None
        return endpoint.mailbox if endpoint is not None else None

    def mailbox_released(self, agent: AgentId, mailbox: Mailbox) -> None:
        """The core holds `agent`'s mailbox no longer: its endpoint keeps the counts."""
        endpoint = self.endpoints.get(agent.type) if agent.key == TOPIC_SOURCE else None
        if endpoint is not None:
            endpoint.mailbox_released(mailbox)

    def undeliverable(self, agent: AgentId, message: Any, error: BaseException) -> None:
        """The core could not deliver `message` to `agent`: free its place, record a dead letter."""
        envelope = message if isinstance(message, AUNMessage) else None
        endpoint = self.endpoints.get(agent.type)
        if envelope is not None and endpoint is not None:
            self.mailbox_rule.undelivered(endpoint.mailbox, envelope.message_id)
        self.failures.dead_letter(agent.type, envelope, error)


def check_handler_timeout(timeout: float | None) -> None:
    """Refuse a handler timeout that is not a positive number of seconds or None."""
    if timeout is not None and not timeout > 0:
        raise ValueError(f"a handler_timeout is a positive number of seconds, or None for no limit (got {timeout!r})")
