"""`AUNActorRuntime`: autogen-core's `AgentRuntime` protocol, implemented the actor way.

autogen-core's single-threaded runtime puts every message through one queue, starts a task per
delivery, serialises each message up to three times for its event log and opens about six tracing
spans per delivery, whether anyone listens or not; one agent may run twenty handlers at once. This
runtime keeps the protocol (agents, `RoutedAgent` handlers, `TypeSubscription` and
`TypePrefixSubscription`, serializers, `AgentId`/`TopicId`, save/load state) and changes how
messages travel:

* **A mailbox per agent, drained by one task.** A publish routes the message (an indexed lookup),
  admits it to each recipient's [`Mailbox`][aun_runtime.Mailbox] and appends it to the recipient's queue.
  An agent with messages has exactly one drain task, which hands them to the agent one at a time, in
  arrival order; the task ends when the queue is empty. So an idle agent costs no task.
* **Backpressure.** Each mailbox has a bound and an overflow policy. Under `block` a publisher that
  meets a full mailbox waits for room (first come, first served), which keeps memory flat however
  fast it publishes; under `dead_letter` the message is refused and reported.
* **Nothing per delivery that is not needed.** The message is not copied or serialised, one
  `MessageContext` serves every recipient, and there are no spans unless tracing is on
  (`aun_runtime.core._actor_tracing`; then they are autogen-core's, in its tree) and no
  intervention work unless handlers are installed (`aun_runtime.core._intervention`; `on_publish`
  runs before the message is queued, so a drop leaves nothing for `stop_when_idle` to wait for).
* **Idle eviction.** An instance idle for `idle_timeout` seconds is saved (`save_state`), closed
  and dropped; its next message creates a new one and loads that state (`aun_runtime.core._eviction`).
* **Failures are reported.** A message that is refused, dropped by an intervention handler, cannot
  reach its agent (unknown type, a factory that raises), whose handler raises, or that is still
  queued when the runtime stops is passed to the `on_undeliverable` hook (the AUN facade archives
  it as a dead letter) or logged. With `ignore_unhandled_exceptions=False` a handler's failure and
  an agent's failed creation are also kept, and `stop()` raises the first, as autogen-core does. The drain task
  survives a handler that raises (`CancelledError` included, as when the publisher cancels the
  message's token) and goes on with the next message; a hook that raises is logged.
* **No RPC.** `send_message` raises [`RPCForbiddenError`][aun_runtime.RPCForbiddenError] before anything is queued.

The runtime itself is the protocol's face: it makes its parts, wires them together and delegates
to them. Each part has one concern: publishing (`aun_runtime.core._actor_publish`), the drain
(`aun_runtime.core._actor_drain`), the agents' registration and creation (`aun_runtime.core._actor_agents`),
the lifecycle and agents' state (`aun_runtime.core._actor_lifecycle`, where their details are), failures
(`aun_runtime.core._actor_failures`) and tracing (`aun_runtime.core._actor_tracing`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from autogen_core import (
    Agent,
    AgentId,
    AgentRuntime,
    AgentType,
    CancellationToken,
    InterventionHandler,
    MessageContext,
    MessageSerializer,
    Subscription,
    TopicId,
)
from opentelemetry.trace import TracerProvider

from ..base._autogen_internals import SerializationRegistry
from ..base._errors import ConfigurationError
from ..base._topics import INBOX_PREFIX
from ..delivery._core_protocol import (
    AUNCore,
    InProcessCore,
    MailboxProvider,
    MailboxReleasedHook,
    UndeliverableHook,
)
from ..delivery._mailbox import Mailbox, MailboxOptions, OverflowPolicy
from ..storage._agent_state import AgentStateStore, MemoryStateStore
from ._actor_agents import ActorAgents
from ._actor_cell import Cell, Delivery, LazyCancellationToken
from ._actor_drain import ActorDrains
from ._actor_failures import DeliveryFailures
from ._actor_lifecycle import ActorLifecycle
from ._actor_publish import ActorPublisher
from ._actor_tracing import RuntimeTracer, tracing_provider
from ._eviction import DEFAULT_IDLE_TIMEOUT
from ._intervention import PublishInterventions
from ._no_rpc import RefusesRPC
from ._subscription_index import SubscriptionIndex

__all__ = ["AUNActorRuntime"]

T = TypeVar("T", bound=Agent)
_type_of = type  # the protocol's methods take a parameter named ``type``


class AUNActorRuntime(RefusesRPC, InProcessCore, AgentRuntime):
    """An in-process autogen-core runtime with actor semantics: one mailbox and one drain per agent.

    Args:
        mailbox_capacity: the bound of each agent's mailbox (unless a mailbox provider gives one).
        overflow: what happens when a message meets a full mailbox.
        block_timeout: how long a publisher waits for room under `block`; after that the message
            is queued over the bound and counted in the mailbox's `overflowed`.

            Any of these three given makes them the runtime's [`mailbox_options`][aun_runtime.AUNCore.mailbox_options], which an
            [`AUNRuntime`][aun_runtime.AUNRuntime] on this core uses for every AID's mailbox; those not
            given keep [`MailboxOptions`][aun_runtime.MailboxOptions]' defaults.
        idle_timeout: seconds an agent instance may stay idle before it is saved and dropped; None
            never evicts.
        state_store: where evicted agents' state waits (default: in memory).
        intervention_handlers: autogen-core intervention handlers; their `on_publish` sees (and may
            change or drop) every message published, before it is queued for anyone; a message one
            drops is a dead letter for each agent it would have reached. A handler without
            `on_publish` is refused with
            [`InterventionHandlerError`][aun_runtime.InterventionHandlerError].
        tracer_provider: an OpenTelemetry tracer provider (default: the SDK provider installed
            globally, if any); its spans are autogen-core's: names, attributes and tree.
        ignore_unhandled_exceptions: as on autogen-core's runtime: if False, the first exception a
            handler raises, or an agent's creation for a message raises, is raised again by
            `stop`/`stop_when_idle`. Either way the message is reported undeliverable.

    Example:
        Plain autogen-core code, unchanged:

        >>> import asyncio
        >>> from dataclasses import dataclass
        >>> from autogen_core import DefaultTopicId, MessageContext, RoutedAgent, default_subscription, event
        >>> @dataclass
        ... class Hello:
        ...     text: str
        >>> @default_subscription
        ... class Greeter(RoutedAgent):
        ...     def __init__(self) -> None:
        ...         super().__init__("greets")
        ...         self.heard: list[str] = []
        ...
        ...     @event
        ...     async def on_hello(self, message: Hello, ctx: MessageContext) -> None:
        ...         self.heard.append(message.text)
        >>> async def main() -> list[str]:
        ...     runtime = AUNActorRuntime()
        ...     await Greeter.register(runtime, "greeter", Greeter)
        ...     runtime.start()
        ...     await runtime.publish_message(Hello("hi"), DefaultTopicId())
        ...     await runtime.stop_when_idle()
        ...     greeter = await runtime.try_get_underlying_agent_instance(AgentId("greeter", "default"), Greeter)
        ...     return greeter.heard
        >>> asyncio.run(main())
        ['hi']

        autogen-core's intervention handlers see every publish first, and may drop it (nobody then
        receives it, and nothing waits for it):

        >>> from autogen_core import DefaultInterventionHandler, DropMessage
        >>> class NoShouting(DefaultInterventionHandler):
        ...     async def on_publish(self, message, *, message_context):
        ...         return DropMessage if message.text.isupper() else message
        >>> async def filtered() -> list[str]:
        ...     runtime = AUNActorRuntime(intervention_handlers=[NoShouting()])
        ...     await Greeter.register(runtime, "greeter", Greeter)
        ...     runtime.start()
        ...     for text in ("hi", "HEY", "bye"):
        ...         await runtime.publish_message(Hello(text), DefaultTopicId())
        ...     await runtime.stop_when_idle()
        ...     greeter = await runtime.try_get_underlying_agent_instance(AgentId("greeter", "default"), Greeter)
        ...     return greeter.heard
        >>> asyncio.run(filtered())
        ['hi', 'bye']
    """

    #: It runs each agent's messages one at a time itself: the AUN facade hands it the mailboxes.
    drains_mailboxes: ClassVar[bool] = True

    def __init__(
        self,
        *,
        mailbox_capacity: int | None = None,
        overflow: OverflowPolicy | str | None = None,
        block_timeout: float | None = None,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        state_store: AgentStateStore | None = None,
        intervention_handlers: Sequence[InterventionHandler] | None = None,
        tracer_provider: TracerProvider | None = None,
        ignore_unhandled_exceptions: bool = True,
    ) -> None:
        options = {"capacity": mailbox_capacity, "overflow": overflow, "block_timeout": block_timeout}
        given: dict[str, Any] = {name: value for name, value in options.items() if value is not None}
        # How the mailboxes the runtime makes itself are made: the options given, else the defaults.
        self._mailboxes = MailboxOptions(**given)  # checks them once, here
        self._mailbox_options = self._mailboxes if given else None
        self._cells: dict[AgentId, Cell] = {}
        # Each AID's inbox subscription is kept by the index's inbox rule: no object per AID.
        self._routes = SubscriptionIndex(INBOX_PREFIX)
        self._serializers = SerializationRegistry()
        provider = tracing_provider(tracer_provider)
        tracer = RuntimeTracer(provider, type(self).__name__) if provider is not None else None
        if state_store is not None and not isinstance(state_store, AgentStateStore):
            # Refused here, not when the runtime is closed and the store's `durable`/`close` are first asked.
            raise ConfigurationError(
                f"state_store {type(state_store).__name__} is not an AgentStateStore: it needs put, take, peek, "
                "items, __len__, close and durable (whether the runtime saves its instances into it at close)"
            )
        interventions = PublishInterventions(intervention_handlers) if intervention_handlers else None
        # The one test a publish makes: neither tracing nor interventions means the plain path, which
        # does no work for either.
        self._plain = tracer is None and interventions is None
        # The parts, each holding what it needs of the others (see where-things-live.md). The
        # lifecycle is made first: the others hold it, and it is connected to them once they exist.
        self._failures = failures = DeliveryFailures(ignore_unhandled_exceptions)
        self._lifecycle = lifecycle = ActorLifecycle(
            self._cells,
            failures,
            idle_timeout=idle_timeout,
            store=state_store if state_store is not None else MemoryStateStore(),
        )
        self._agents = agents = ActorAgents(self, self._cells, lifecycle, failures, self._mailboxes)
        drains = ActorDrains(self._cells, lifecycle, failures, agents, tracer, self._serializers)
        lifecycle.connect(
            known_types=agents.types,
            start_drain=drains.start,
            get_agent=agents.get_agent,
            get_agent_of=agents.get_agent_of,
            cell_dropped=agents.cell_dropped,
        )
        self._publisher = ActorPublisher(
            self._cells,
            self._routes,
            lifecycle,
            failures,
            agents=agents,
            drains=drains,
            interventions=interventions,
            tracer=tracer,
        )

    # -- what an AUN runtime facade needs of its core (AUNCore) ---------------------------------------

    @property
    def mailbox_options(self) -> MailboxOptions | None:
        """The mailbox options this runtime was given (`mailbox_capacity`, `overflow`,
        `block_timeout`), or None if it was given none."""
        return self._mailbox_options

    @property
    def mailbox_capacity(self) -> int:
        """The bound of the mailboxes this runtime makes itself."""
        return self._mailboxes.capacity

    @property
    def overflow(self) -> OverflowPolicy:
        """The overflow policy of the mailboxes this runtime makes itself."""
        return self._mailboxes.overflow

    @property
    def block_timeout(self) -> float:
        """The blocking timeout of the mailboxes this runtime makes itself."""
        return self._mailboxes.block_timeout

    def attach(
        self,
        *,
        mailbox_provider: MailboxProvider | None = None,
        on_undeliverable: UndeliverableHook | None = None,
        on_mailbox_released: MailboxReleasedHook | None = None,
    ) -> None:
        """Let a facade supply agents' mailboxes (so their bound and policy live in one place), hear
        when this runtime holds one no longer (its agent's cell went: evicted with nothing pending),
        and hear about undeliverable messages (to record them as dead letters)."""
        self._agents.mailbox_provider = mailbox_provider
        self._agents.on_mailbox_released = on_mailbox_released
        self._failures.on_undeliverable = on_undeliverable

    def mailbox(self, agent_id: AgentId) -> Mailbox | None:
        """The mailbox of an agent that has a cell (an instance or pending messages), else None."""
        cell = self._cells.get(agent_id)
        return cell.mailbox if cell is not None else None

    # -- lifecycle (see aun_runtime.core._actor_lifecycle) ------------------------------------------------

    def start(self) -> None:
        """Start delivering. Raises RuntimeError if already started, or closed."""
        self._lifecycle.start()

    async def idle(self) -> None:
        """Wait until every queued message, and everything it caused, has been handled.

        Raises:
            RuntimeError: messages are queued but the runtime is not started (they would wait forever),
                or a handler called it: it would wait for that very handler (start a task for it, or
                call `stop()`).
        """
        await self._lifecycle.idle()

    async def stop(self) -> None:
        """Stop now: cancel running handlers; the messages they were handling and those still queued
        are reported as undeliverable ([`RuntimeStoppedError`][aun_runtime.RuntimeStoppedError]; an
        [`AUNRuntime`][aun_runtime.AUNRuntime] archives them as dead letters). It never hangs, and the
        runtime can be started again."""
        await self._lifecycle.stop()

    async def stop_when_idle(self) -> None:
        """Wait until everything queued has been handled, then stop."""
        await self._lifecycle.stop_when_idle()

    async def stop_when(self, condition: Callable[[], bool], check_period: float = 1.0) -> None:
        """Stop once `condition()` is true, checking every `check_period` seconds (as autogen-core)."""
        while not condition():  # noqa: ASYNC110 - a plain predicate has nothing to wait on (autogen-core's API)
            await asyncio.sleep(check_period)
        await self.stop()

    async def close(self) -> None:
        """Stop if running, then close every agent instance in memory and the state store.

        With a durable state store (`store.durable`), each instance's state is saved into it first,
        as if it were evicted, and the store is closed: a runtime started on the same store later
        carries on from there. Messages still queued are reported as undeliverable with
        [`RuntimeStoppedError`][aun_runtime.RuntimeStoppedError], as `stop()` does.

        All of it happens whatever fails on the way: an agent whose `save_state` or `close` raises
        is logged and the others are still saved and closed; a handler's exception that `stop()`
        raises (`ignore_unhandled_exceptions=False`) is raised once the store is closed. A second
        `close()` does nothing.
        """
        await self._lifecycle.close()

    async def evict_idle(self, older_than: float = 0.0) -> int:
        """Evict now every instance idle for at least `older_than` seconds; returns how many.

        The timer does this by itself after `idle_timeout`; call it to shed memory at once.
        """
        return await self._lifecycle.evict_idle(older_than)

    @property
    def unprocessed_messages_count(self) -> int:
        """Messages queued or being handled."""
        return self._lifecycle.unfinished

    @property
    def instances(self) -> int:
        """Agent instances in memory."""
        return sum(1 for cell in self._cells.values() if cell.agent is not None)

    @property
    def saved_states(self) -> int:
        """Agents out of memory whose saved state waits for their next message."""
        return self._lifecycle.saved_states

    @property
    def evicted(self) -> int:
        """Agent instances evicted so far."""
        return self._lifecycle.evicted

    # -- state -------------------------------------------------------------------------------------

    async def save_state(self) -> Mapping[str, Any]:
        """The agents' own state, `{str(agent_id): state}`, for the instances in memory and for
        evicted agents (their saved state). Messages still queued are not part of it."""
        return await self._lifecycle.save_state()

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Load agents' state: into instances in memory now, into the others when they are created
        (so loading 100,000 agents' state creates no instance)."""
        await self._lifecycle.load_state(state)

    async def agent_save_state(self, agent: AgentId) -> Mapping[str, Any]:
        return await self._lifecycle.agent_save_state(agent)

    async def agent_load_state(self, agent: AgentId, state: Mapping[str, Any]) -> None:
        await self._lifecycle.agent_load_state(agent, state)

    # -- messages ----------------------------------------------------------------------------------

    async def publish_message(
        self,
        message: Any,
        topic_id: TopicId,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> None:
        """Deliver `message` to every agent subscribed to `topic_id` except its sender.

        Returns once the message is in every recipient's mailbox. Under the `block` policy that may
        mean waiting for room; that wait is the backpressure that keeps a fast publisher from
        piling messages up. A recipient whose mailbox refuses it (`dead_letter`) or that cannot
        be created is reported to `on_undeliverable`; the others still get it.
        """
        # sender, topic_id, is_rpc, cancellation_token, message_id (positional: cheaper, once per publish)
        ctx = MessageContext(
            sender, topic_id, False, cancellation_token or LazyCancellationToken(), message_id or str(uuid.uuid4())
        )
        if self._plain:
            delivery = Delivery(message, ctx)
            waiting = self._publisher.route(delivery, topic_id, sender)
            if waiting:
                await self._publisher.route_waiting(delivery, waiting)
            return
        await self._publisher.publish_observed(message, topic_id, ctx)

    async def publish_copies(
        self, message: Any, topic_ids: Sequence[TopicId], *, sender: AgentId | None = None, message_id: str
    ) -> None:
        """Publish `message` on each of `topic_ids` in turn, as that many `publish_message` calls
        would: the copies of one group post, each on its member's inbox topic.

        One call for all of them: one coroutine and one cancellation token for the post, a
        `MessageContext` (its topic differs) and a `Delivery` per copy. A copy whose mailbox makes
        the publisher wait is waited for before the next one is routed, so the copies reach their
        mailboxes in the order given, as one by one.
        """
        if not self._plain:  # interventions and spans see each copy as a publish of its own
            for topic_id in topic_ids:
                await self.publish_message(message, topic_id, sender=sender, message_id=message_id)
            return
        token = LazyCancellationToken()
        publisher = self._publisher
        for topic_id in topic_ids:
            delivery = Delivery(message, MessageContext(sender, topic_id, False, token, message_id))
            waiting = publisher.route(delivery, topic_id, sender)
            if waiting:
                await publisher.route_waiting(delivery, waiting)

    # -- agents ------------------------------------------------------------------------------------

    async def register_factory(
        self,
        type: str | AgentType,
        agent_factory: Callable[[], T | Awaitable[T]],
        *,
        expected_class: type[T] | None = None,
    ) -> AgentType:
        agent_type = AgentType(type) if isinstance(type, str) else type
        self._agents.register_factory(agent_type, agent_factory, expected_class)
        return agent_type

    async def register_agent_instance(self, agent_instance: Agent, agent_id: AgentId) -> AgentId:
        await self._agents.register_instance(agent_instance, agent_id)
        return agent_id

    async def try_get_underlying_agent_instance(self, id: AgentId, type: type[T] = Agent) -> T:  # type: ignore[assignment]
        if id.type not in self._agents.types:
            raise LookupError(f"Agent with name {id.type} not found.")
        agent = await self._agents.get_agent(id)
        if not isinstance(agent, type):
            raise TypeError(
                f"Agent with name {id.type} is not of type {type.__name__}. "
                f"It is of type {_type_of(agent).__name__}"
            )
        return agent

    async def get(
        self, id_or_type: AgentId | AgentType | str, /, key: str = "default", *, lazy: bool = True
    ) -> AgentId:
        if isinstance(id_or_type, AgentId):
            agent_id = id_or_type
        else:
            agent_id = AgentId(id_or_type if isinstance(id_or_type, str) else id_or_type.type, key)
        if not lazy:
            await self._agents.get_agent(agent_id)
        return agent_id

    async def agent_metadata(self, agent: AgentId) -> Any:
        return (await self._agents.get_agent(agent)).metadata

    # -- subscriptions and serializers -------------------------------------------------------------

    async def add_subscription(self, subscription: Subscription) -> None:
        self._routes.add(subscription)

    async def remove_subscription(self, id: str) -> None:
        self._routes.remove(id)

    @property
    def subscriptions(self) -> Sequence[Subscription]:
        """Every subscription, in the order it was added."""
        return self._routes.subscriptions

    def add_message_serializer(self, serializer: MessageSerializer[Any] | Sequence[MessageSerializer[Any]]) -> None:
        self._serializers.add_serializer(serializer)


if TYPE_CHECKING:
    # mypy holds the runtime to what the facade needs of its core, member by member.
    _as_core: AUNCore = AUNActorRuntime()
