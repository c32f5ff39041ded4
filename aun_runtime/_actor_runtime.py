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
  (`aun_runtime._actor_tracing`; then they are autogen-core's, in its tree) and no
  intervention work unless handlers are installed (`aun_runtime._intervention`; `on_publish`
  runs before the message is queued, so a drop leaves nothing for `stop_when_idle` to wait for).
* **Idle eviction.** An instance idle for `idle_timeout` seconds is saved (`save_state`), closed
  and dropped; its next message creates a new one and loads that state (`aun_runtime._eviction`).
* **Failures are reported.** A message that is refused, dropped by an intervention handler, cannot
  reach its agent (unknown type, a factory that raises), whose handler raises, or that is still
  queued when the runtime stops is passed to the `on_undeliverable` hook (the AUN facade archives
  it as a dead letter) or logged. With `ignore_unhandled_exceptions=False` a handler's failure and
  an agent's failed creation are also kept, and `stop()` raises the first, as autogen-core does. The drain task
  survives a handler that raises (`CancelledError` included, as when the publisher cancels the
  message's token) and goes on with the next message; a hook that raises is logged.
* **No RPC.** `send_message` raises [`RPCForbiddenError`][aun_runtime.RPCForbiddenError] before anything is queued.

Lifecycle and state details are in `aun_runtime._actor_lifecycle`.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar, cast

from autogen_core import (
    Agent,
    AgentId,
    AgentInstantiationContext,
    AgentRuntime,
    AgentType,
    BaseAgent,
    CancellationToken,
    InterventionHandler,
    MessageContext,
    MessageHandlerContext,
    MessageSerializer,
    Subscription,
    TopicId,
)
from opentelemetry import context as otel_context
from opentelemetry.trace import TracerProvider

from ._actor_cell import Cell, Delivery, LazyCancellationToken
from ._actor_lifecycle import ActorLifecycle
from ._actor_tracing import PublishTrace, RuntimeTracer, tracing_provider
from ._agent_state import AgentStateStore, MemoryStateStore
from ._autogen_internals import SerializationRegistry
from ._core_protocol import AUNCore, InProcessCore, MailboxProvider, MailboxReleasedHook, UndeliverableHook
from ._errors import AgentCreationError, MailboxFullError, MessageDroppedError, UndeliverableError
from ._eviction import DEFAULT_IDLE_TIMEOUT
from ._intervention import PublishInterventions, begin_publish, detached
from ._mailbox import Mailbox, MailboxOptions, OverflowPolicy
from ._no_rpc import RefusesRPC
from ._subscription_index import SubscriptionIndex
from ._topics import INBOX_PREFIX

__all__ = ["DRAIN_BATCH", "AUNActorRuntime"]

logger = logging.getLogger("aun_runtime")

T = TypeVar("T", bound=Agent)
_type_of = type  # the protocol's methods take a parameter named ``type``

#: Messages a drain task hands to its agent before it lets other tasks run. Handlers that never await
#: would otherwise let one busy agent hold the event loop until its whole mailbox is empty.
DRAIN_BATCH = 64


def _log_name(agent_id: AgentId) -> str:
    """`agent_id` as log lines name it: its type alone under autogen-core's default key (every AUN
    agent's: the type is its AID), else `type/key`."""
    return agent_id.type if agent_id.key == "default" else str(agent_id)


class _Factory:
    """A factory that needs more than a plain call: two arguments (deprecated in autogen-core) or a
    class to check. A plain zero-argument factory is kept as it is (one object less per type)."""

    __slots__ = ("expected", "make", "takes_runtime")

    def __init__(self, make: Callable[..., Any], expected: type[Agent] | None, takes_runtime: bool) -> None:
        self.make = make
        self.expected = expected
        self.takes_runtime = takes_runtime


def _factory_entry(make: Callable[..., Any], expected: type[Agent] | None) -> Callable[..., Any] | _Factory:
    arity = len(inspect.signature(make).parameters)
    if arity not in (0, 2):
        raise ValueError("Agent factory must take 0 or 2 arguments.")
    if arity == 0 and expected is None:
        return make
    return _Factory(make, expected, arity == 2)


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
        self._factories: dict[str, Callable[..., Any] | _Factory] = {}
        self._instance_types: dict[str, type[Agent]] = {}
        # The factory registered last, with its class and entry: registering it again for the next
        # type (as an AUN runtime does for every AID of a class) reads no signature.
        self._last_factory: tuple[Callable[..., Any], type[Agent] | None, Callable[..., Any] | _Factory] | None = None
        self._cells: dict[AgentId, Cell] = {}
        # Each AID's inbox subscription is kept by the index's inbox rule: no object per AID.
        self._routes = SubscriptionIndex(INBOX_PREFIX)
        self._serializers = SerializationRegistry()
        self._mailbox_provider: MailboxProvider | None = None
        self._on_undeliverable: UndeliverableHook | None = None
        self._on_mailbox_released: MailboxReleasedHook | None = None
        provider = tracing_provider(tracer_provider)
        self._tracer = RuntimeTracer(provider, type(self).__name__) if provider is not None else None
        self._interventions = PublishInterventions(intervention_handlers) if intervention_handlers else None
        # The one test a publish makes: neither tracing nor interventions means the plain path, which
        # does no work for either.
        self._plain = self._tracer is None and self._interventions is None
        self._ignore_unhandled = ignore_unhandled_exceptions
        self._lifecycle = ActorLifecycle(
            self._cells,
            self._factories,
            start_drain=self._start_drain,
            undeliverable=self._undeliverable,
            get_agent=self._get_agent,
            get_agent_of=self._get_agent_of,
            cell_dropped=self._cell_dropped,
            idle_timeout=idle_timeout,
            store=state_store if state_store is not None else MemoryStateStore(),
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
        self._mailbox_provider = mailbox_provider
        self._on_undeliverable = on_undeliverable
        self._on_mailbox_released = on_mailbox_released

    def mailbox(self, agent_id: AgentId) -> Mailbox | None:
        """The mailbox of an agent that has a cell (an instance or pending messages), else None."""
        cell = self._cells.get(agent_id)
        return cell.mailbox if cell is not None else None

    # -- lifecycle (see aun_runtime._actor_lifecycle) ------------------------------------------------

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
            waiting = self._route(delivery, topic_id, sender)
            if waiting:
                await self._route_waiting(delivery, waiting)
            return
        await self._publish_observed(message, topic_id, ctx)

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
        for topic_id in topic_ids:
            delivery = Delivery(message, MessageContext(sender, topic_id, False, token, message_id))
            waiting = self._route(delivery, topic_id, sender)
            if waiting:
                await self._route_waiting(delivery, waiting)

    async def _publish_observed(self, message: Any, topic_id: TopicId, ctx: MessageContext) -> None:
        """A publish with intervention handlers, or traced (autogen-core's spans, in its tree: see
        `aun_runtime._actor_tracing`), or both."""
        helper = self._tracer.helper if self._tracer is not None else None
        result, created = await begin_publish(message, topic_id, ctx, self._interventions, helper)
        if isinstance(result, MessageDroppedError):
            self._dropped(message, result, topic_id, ctx.sender)
            return
        message = result
        if helper is None or created is None:
            delivery = Delivery(message, ctx)
            waiting = self._route(delivery, topic_id, ctx.sender)
            if waiting:
                await self._route_waiting(delivery, waiting)
            return
        with detached(), helper.trace_block("publish", topic_id, parent=created, end_on_exit=False) as span:
            trace = PublishTrace(created, span)
        delivery = Delivery(message, ctx, trace)
        try:
            lifecycle = self._lifecycle
            queued = lifecycle.unfinished
            waiting = self._route(delivery, topic_id, ctx.sender)
            # _route awaits nothing, so no delivery can have finished meanwhile: what it added to
            # the count is exactly what it queued (counting here keeps _enqueue free of tracing).
            trace.hold(lifecycle.unfinished - queued)
            if waiting:
                await self._route_waiting(delivery, waiting)
        finally:
            trace.release()  # the publisher's hold: the span ends with the last delivery

    def _dropped(
        self, message: Any, error: MessageDroppedError, topic_id: TopicId, sender: AgentId | None
    ) -> None:
        """An intervention handler dropped `message`: it is reported for each agent it would have reached."""
        routes = self._routes
        if sender is None:
            recipients = routes.recipients(topic_id)
        else:
            recipients = routes.recipients_without(topic_id, sender)
        if not recipients:
            logger.info("a message published on %s was dropped (%s); nobody was subscribed", topic_id, error)
        for agent_id in recipients:
            self._undeliverable(agent_id, message, error)

    def _route(self, delivery: Delivery, topic_id: TopicId, sender: AgentId | None) -> list[AgentId] | None:
        """Queue `delivery` for every recipient that has room now (no coroutine: the usual case);
        return the recipients whose mailbox makes the publisher wait, in order."""
        message_id = delivery.ctx.message_id
        cells = self._cells
        routes = self._routes
        recipients = routes.recipients(topic_id) if sender is None else routes.recipients_without(topic_id, sender)
        waiting: list[AgentId] | None = None
        for agent_id in recipients:
            if waiting is not None:  # behind one that waits: keep the order for the rest
                waiting.append(agent_id)
                continue
            cell = cells.get(agent_id)
            if cell is None:
                cell = self._new_cell(agent_id, delivery.message)
                if cell is None:
                    continue
            if cell.mailbox.take_if_room(message_id):
                self._enqueue(cell, delivery)
            else:
                waiting = [agent_id]
        return waiting

    async def _route_waiting(self, delivery: Delivery, recipients: list[AgentId]) -> None:
        message_id = delivery.ctx.message_id
        sender = delivery.ctx.sender
        publisher = None if sender is None else _log_name(sender)  # named in a full-mailbox warning
        for agent_id in recipients:
            cell = self._cells.get(agent_id) or self._new_cell(agent_id, delivery.message)
            if cell is None:
                continue
            mailbox = cell.mailbox
            if mailbox.owner is None:  # named only once it makes someone wait: no string per cell
                mailbox.owner = _log_name(agent_id)
            # The wait is on the mailbox, which outlives its cell: the cell may be replaced meanwhile
            # (a place promised to us keeps it from being dropped once we have it).
            if not await mailbox.enter(message_id, publisher):
                self._undeliverable(
                    agent_id,
                    delivery.message,
                    MailboxFullError(f"{agent_id}: mailbox full ({cell.mailbox.capacity} messages)"),
                )
                if cell.agent is None:
                    self._lifecycle.went_idle(cell)  # a cell made for this message alone goes with it
                continue
            cell = self._cells.get(agent_id) or self._new_cell(agent_id, delivery.message)
            if cell is not None:
                if delivery.trace is not None:
                    delivery.trace.hold()  # the publish span waits for this copy too
                self._enqueue(cell, delivery)

    def _new_cell(self, agent_id: AgentId, message: Any = None) -> Cell | None:
        """A cell for an agent the runtime can create; else `message` is reported (and the
        failure kept, as a factory's would be), and None."""
        error = self._cannot_create(agent_id)
        if error is not None:
            self._creation_failed(error)
            self._undeliverable(agent_id, message, error)
            return None
        return self._make_cell(agent_id)

    def _cannot_create(self, agent_id: AgentId) -> AgentCreationError | None:
        factory = self._factories.get(agent_id.type)
        if factory is None:
            return AgentCreationError.unregistered(agent_id, agent_id.type)
        if factory is _no_factory:
            return AgentCreationError.instances_only(agent_id, agent_id.type)
        return None

    def _make_cell(self, agent_id: AgentId) -> Cell:
        mailbox = self._mailbox_provider(agent_id) if self._mailbox_provider is not None else None
        cell = Cell(agent_id, mailbox or self._mailboxes.mailbox())
        self._cells[agent_id] = cell
        return cell

    def _cell_dropped(self, cell: Cell) -> None:
        """`cell` is gone from memory: its mailbox, if the facade's, is held here no longer."""
        released = self._on_mailbox_released
        if released is not None:
            released(cell.agent_id, cell.mailbox)

    def _enqueue(self, cell: Cell, delivery: Delivery) -> None:
        queue = cell.queue  # the queue and the count, updated here directly: this runs per delivery
        if queue is None:
            cell.queue = queue = deque()
        queue.append(delivery)
        cell.touched += 1
        lifecycle = self._lifecycle
        if not lifecycle.unfinished:
            lifecycle.idle_event.clear()
        lifecycle.unfinished += 1
        if cell.idle_listed:
            lifecycle.idle_list_discard(cell)
        if cell.task is None and lifecycle.running and not cell.evicting:
            self._start_drain(cell)

    def _start_drain(self, cell: Cell) -> None:
        # A fresh context: the drain must not inherit the publisher's context variables (the
        # handler context of the agent that happened to publish first, for one).
        cell.task = asyncio.get_running_loop().create_task(self._drain(cell), context=contextvars.Context())

    async def _drain(self, cell: Cell) -> None:
        """Hand the cell's messages to its agent, one at a time, until the queue is empty."""
        lifecycle = self._lifecycle
        epoch = lifecycle.epoch
        this = asyncio.current_task()
        try:
            agent = cell.agent
            if agent is None:
                try:
                    agent = await self._get_agent_of(cell)
                except Exception as exc:  # the factory or load_state failed: nothing can be handled
                    if lifecycle.epoch == epoch:
                        self._fail_queued(cell, exc)
                    return
            queue = cell.queue
            mailbox = cell.mailbox
            tracer = self._tracer
            # BaseAgent.on_message only awaits on_message_impl: call that directly (one frame less
            # per message), unless a class overrides on_message after all.
            receive = (
                agent.on_message_impl
                if isinstance(agent, BaseAgent) and type(agent).on_message is BaseAgent.on_message
                else agent.on_message
            )
            handled = 0
            with MessageHandlerContext.populate_context(cell.agent_id):
                while queue and lifecycle.epoch == epoch:
                    delivery = queue.popleft()
                    cell.current = delivery
                    try:
                        if tracer is None:
                            await receive(delivery.message, delivery.ctx)
                        else:
                            await self._handle_traced(agent, delivery)
                    except Exception as exc:
                        self._handler_failed(cell.agent_id, delivery.message, exc)
                    except asyncio.CancelledError as exc:
                        if lifecycle.epoch != epoch or (this is not None and this.cancelling()):
                            raise  # the drain itself is cancelled: by stop(), or from outside
                        # Cancelled inside the handler only (a future tied to the message's token,
                        # which its publisher cancelled): that message failed, the others go on.
                        self._handler_failed(cell.agent_id, delivery.message, exc)
                    if lifecycle.epoch != epoch:
                        break  # stopped meanwhile: stop() accounts for this message and the rest
                    cell.current = None
                    mailbox.release()
                    lifecycle.unfinished -= 1  # message_finished(), inlined: this runs per delivery
                    if not lifecycle.unfinished:
                        lifecycle.idle_event.set()
                    handled += 1
                    if handled == DRAIN_BATCH:
                        handled = 0
                        await asyncio.sleep(0)  # let other agents (and publishers) run
        finally:
            if lifecycle.epoch == epoch:  # else stop() has accounted for this cell
                cell.task = None
                interrupted, cell.current = cell.current, None
                if interrupted is not None:  # cancelled from outside mid-handler: finish that message
                    cell.mailbox.release()
                    lifecycle.message_finished()
                    self._undeliverable(
                        cell.agent_id,
                        interrupted.message,
                        UndeliverableError("the drain was cancelled while this message was being handled"),
                    )
                if cell.queue:
                    if lifecycle.running and not cell.evicting:
                        self._start_drain(cell)  # the rest must not wait for a drain that is gone
                else:
                    cell.queue = None  # an idle cell keeps no deque
                    lifecycle.went_idle(cell)

    async def _handle_traced(self, agent: Agent, delivery: Delivery) -> None:
        """Handle one delivery inside its `process` span: a child of the publish span, linked to
        the publish's create span; the publish span waits for it no longer once it has ended."""
        assert self._tracer is not None
        trace = delivery.trace
        token = otel_context.attach(trace.context) if trace is not None else None
        try:
            await self._process_traced(agent, delivery)
        finally:
            if token is not None:
                otel_context.detach(token)
            delivery.finished()

    async def _process_traced(self, agent: Agent, delivery: Delivery) -> None:
        assert self._tracer is not None
        ctx = delivery.ctx
        sender = self._cells.get(ctx.sender) if ctx.sender is not None else None
        attributes = self._tracer.process_attributes(
            self._serializers,
            ctx.sender,
            type(sender.agent).__name__ if sender is not None and sender.agent is not None else None,
            agent.id,
            type(agent).__name__,
            ctx,
            delivery.message,
        )
        created = delivery.trace.created if delivery.trace is not None else None
        with self._tracer.helper.trace_block("process", agent.id, parent=created, attributes=attributes):
            await agent.on_message(delivery.message, ctx=ctx)

    # -- failures ----------------------------------------------------------------------------------

    def _undeliverable(self, agent_id: AgentId, message: Any, error: BaseException) -> None:
        if self._on_undeliverable is not None:
            self._report(agent_id, message, error)
        else:
            logger.warning("undeliverable %s for %s: %s", type(message).__name__, agent_id, error)

    def _handler_failed(self, agent_id: AgentId, message: Any, error: BaseException) -> None:
        if self._on_undeliverable is None:
            logger.error("handler of %s raised on a %s", agent_id, type(message).__name__, exc_info=error)
        else:
            self._report(agent_id, message, error)
        # A cancelled message is no error of the handler; and stop() raising CancelledError would
        # read as stop() itself having been cancelled.
        if not self._ignore_unhandled and isinstance(error, Exception):
            self._lifecycle.keep_failure(error)

    def _report(self, agent_id: AgentId, message: Any, error: BaseException) -> None:
        """Pass a failure to the hook. A hook that raises is logged: it runs inside a drain, a
        publish or stop(), and letting it escape would strand the drain's queue, abort the publish
        midway through its recipients, or leave stop() half done."""
        assert self._on_undeliverable is not None
        try:
            self._on_undeliverable(agent_id, message, error)
        except Exception:
            logger.exception(
                "on_undeliverable raised while reporting a %s for %s (%s)", type(message).__name__, agent_id, error
            )

    def _fail_queued(self, cell: Cell, error: Exception) -> None:
        """The cell's agent could not be created (its factory or `load_state` raised): every
        message queued for it is undeliverable, and the failure is kept as a handler's would be."""
        self._creation_failed(error)
        while cell.queue:
            delivery = cell.queue.popleft()
            cell.mailbox.release()
            delivery.finished()
            self._lifecycle.message_finished()
            self._undeliverable(cell.agent_id, delivery.message, error)
        cell.queue = None

    def _creation_failed(self, error: Exception) -> None:
        # As autogen-core's runtime: an agent that cannot be made for a message is as unhandled as a
        # handler that raises, so with ignore_unhandled_exceptions=False stop() raises it too.
        if not self._ignore_unhandled:
            self._lifecycle.keep_failure(error)

    # -- agents ------------------------------------------------------------------------------------

    async def register_factory(
        self,
        type: str | AgentType,
        agent_factory: Callable[[], T | Awaitable[T]],
        *,
        expected_class: type[T] | None = None,
    ) -> AgentType:
        agent_type = AgentType(type) if isinstance(type, str) else type
        if agent_type.type in self._factories:
            raise ValueError(f"Agent with type {agent_type} already exists.")
        last = self._last_factory
        if last is not None and last[0] is agent_factory and last[1] is expected_class:
            entry = last[2]  # the same factory again (an AUN runtime's, for each AID of a class)
        else:
            entry = _factory_entry(agent_factory, expected_class)  # reads its signature: costly
            self._last_factory = (agent_factory, expected_class, entry)
        self._factories[agent_type.type] = entry
        return agent_type

    async def register_agent_instance(self, agent_instance: Agent, agent_id: AgentId) -> AgentId:
        cell = self._cells.get(agent_id)
        if cell is not None and cell.agent is not None:
            raise ValueError(f"Agent with id {agent_id} already exists.")
        known = self._instance_types.get(agent_id.type)
        if known is None:
            if agent_id.type in self._factories:
                raise ValueError("Agent factories and agent instances cannot be registered to the same type.")
            self._factories[agent_id.type] = _no_factory
            self._instance_types[agent_id.type] = _type_of(agent_instance)
        elif known is not _type_of(agent_instance):
            raise ValueError("Agent instances must be the same object type.")
        await agent_instance.bind_id_and_runtime(id=agent_id, runtime=self)
        cell = cell or self._make_cell(agent_id)
        cell.agent = agent_instance
        cell.resident = True  # its factory cannot re-create it: never evicted
        return agent_id

    async def try_get_underlying_agent_instance(self, id: AgentId, type: type[T] = Agent) -> T:  # type: ignore[assignment]
        if id.type not in self._factories:
            raise LookupError(f"Agent with name {id.type} not found.")
        agent = await self._get_agent(id)
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
            await self._get_agent(agent_id)
        return agent_id

    async def agent_metadata(self, agent: AgentId) -> Any:
        return (await self._get_agent(agent)).metadata

    async def _get_agent(self, agent_id: AgentId) -> Agent:
        cell = self._cells.get(agent_id)
        if cell is None:
            error = self._cannot_create(agent_id)
            if error is not None:
                raise LookupError(f"Agent with name {agent_id.type} not found: {error}.")
            cell = self._make_cell(agent_id)
        agent = await self._get_agent_of(cell)
        if cell.task is None and not cell.queue and not cell.idle_listed:
            self._lifecycle.went_idle(cell)
        return agent

    async def _get_agent_of(self, cell: Cell) -> Agent:
        cell.touched += 1  # an eviction in progress keeps the instance: someone is using it
        while cell.agent is None:
            activation = cell.activation
            if activation is None:
                # A task of its own that every caller awaits through a shield, so that a caller
                # that gives up (a wait_for that timed out, a stopped drain) does not cancel it
                # for the others. Only stop() cancels it.
                activation = cell.activation = asyncio.get_running_loop().create_task(self._activate(cell))
            epoch = self._lifecycle.epoch
            try:
                return await asyncio.shield(activation)
            except asyncio.CancelledError:
                this = asyncio.current_task()
                if not activation.cancelled() or (this is not None and this.cancelling()):
                    raise  # this caller was cancelled
                if self._lifecycle.epoch == epoch:  # the factory itself raised CancelledError
                    raise UndeliverableError(f"creating {cell.agent_id} was cancelled") from None
                # stop() cancelled the activation, not this caller, who still wants the agent.
        return cell.agent

    async def _activate(self, cell: Cell) -> Agent:
        try:
            agent = await self._instantiate(cell.agent_id)
        finally:
            if cell.activation is asyncio.current_task():
                cell.activation = None
        cell.agent = agent
        return agent

    async def _instantiate(self, agent_id: AgentId) -> Agent:
        entry = self._factories[agent_id.type]
        factory = entry if isinstance(entry, _Factory) else None
        with AgentInstantiationContext.populate_context((self, agent_id)):
            try:
                if factory is None:
                    made = cast(Callable[[], Any], entry)()
                else:
                    made = factory.make(self, agent_id) if factory.takes_runtime else factory.make()
                agent = cast(Agent, await made if inspect.isawaitable(made) else made)
            except Exception:  # not CancelledError: stop() interrupting a slow factory is no error
                # autogen-core's wording, which log filters (and its tests) match.
                logger.error("Error constructing agent %s", agent_id, exc_info=True)
                raise
        try:
            if factory is not None and factory.expected is not None and not issubclass(_type_of(agent), factory.expected):
                raise ValueError(
                    f"Factory registered using the wrong type: expected {factory.expected.__name__}, "
                    f"got {_type_of(agent).__name__}"
                )
            await self._lifecycle.restore(agent_id, agent)
        except BaseException:
            # This instance will never be used (of the wrong class, or its state did not load): close
            # it, as an evicted one is, so that whatever it opened is released.
            try:
                await agent.close()
            except Exception:
                logger.warning("closing %s, which could not be used, failed", agent_id, exc_info=True)
            raise
        return agent

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


def _no_factory() -> NoReturn:
    # The marker of a type registered with instances; the runtime never calls it (see _cannot_create).
    raise RuntimeError(
        "an agent registered as an instance cannot be created by the runtime: register the instance "
        "under this AgentId before publishing to it"
    )


if TYPE_CHECKING:
    # mypy holds the runtime to what the facade needs of its core, member by member.
    _as_core: AUNCore = AUNActorRuntime()
