"""The drain: the one task per agent with messages that hands them to the agent, one at a time.

A publish queues a message on its recipient's cell and starts the cell's drain if it has none;
the drain creates the agent's instance if need be, hands it the queued messages in arrival order
(letting other tasks run every `DRAIN_BATCH` messages), survives a handler that raises, and ends
when the queue is empty, so an idle agent costs no task. It is apart from publishing (which only
queues) and from the lifecycle (which cancels drains at a stop and restarts them at a start).
"""

from __future__ import annotations

import asyncio
import contextvars

from autogen_core import Agent, AgentId, BaseAgent, MessageHandlerContext
from opentelemetry import context as otel_context

from ..base._autogen_internals import SerializationRegistry
from ..base._errors import UndeliverableError
from ._actor_agents import ActorAgents
from ._actor_cell import Cell, Delivery
from ._actor_failures import DeliveryFailures
from ._actor_lifecycle import ActorLifecycle
from ._actor_tracing import RuntimeTracer

__all__ = ["DRAIN_BATCH", "ActorDrains"]

#: Messages a drain task hands to its agent before it lets other tasks run. Handlers that never await
#: would otherwise let one busy agent hold the event loop until its whole mailbox is empty.
DRAIN_BATCH = 64


class ActorDrains:
    """Starts and runs the drain tasks of one runtime's cells.

    Args:
        cells: the runtime's cells, by agent (read for a traced message's sender).
        lifecycle: the runtime's lifecycle (whether it runs, its epoch, the count of unfinished messages).
        failures: where a message that was not handled is reported.
        agents: the runtime's agents (asked for a cell's instance when the drain starts without one).
        tracer: the runtime's tracer, or None when tracing is off.
        serializers: the runtime's serializers (a traced message's attributes name its type).
    """

    __slots__ = ("_agents", "_cells", "_failures", "_lifecycle", "_serializers", "_tracer")

    def __init__(
        self,
        cells: dict[AgentId, Cell],
        lifecycle: ActorLifecycle,
        failures: DeliveryFailures,
        agents: ActorAgents,
        tracer: RuntimeTracer | None,
        serializers: SerializationRegistry,
    ) -> None:
        self._cells = cells
        self._lifecycle = lifecycle
        self._failures = failures
        self._agents = agents
        self._tracer = tracer
        self._serializers = serializers

    def start(self, cell: Cell) -> None:
        """Start the drain of `cell`, which has messages queued and no drain."""
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
                    agent = await self._agents.get_agent_of(cell)
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
                        self._failures.handler_failed(cell.agent_id, delivery.message, exc)
                    except asyncio.CancelledError as exc:
                        if lifecycle.epoch != epoch or (this is not None and this.cancelling()):
                            raise  # the drain itself is cancelled: by stop(), or from outside
                        # Cancelled inside the handler only (a future tied to the message's token,
                        # which its publisher cancelled): that message failed, the others go on.
                        self._failures.handler_failed(cell.agent_id, delivery.message, exc)
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
                    self._failures.undeliverable(
                        cell.agent_id,
                        interrupted.message,
                        UndeliverableError("the drain was cancelled while this message was being handled"),
                    )
                if cell.queue:
                    if lifecycle.running and not cell.evicting:
                        self.start(cell)  # the rest must not wait for a drain that is gone
                else:
                    cell.queue = None  # an idle cell keeps no deque
                    lifecycle.went_idle(cell)

    def _fail_queued(self, cell: Cell, error: Exception) -> None:
        """The cell's agent could not be created (its factory or `load_state` raised): every
        message queued for it is undeliverable, and the failure is kept as a handler's would be."""
        self._failures.keep(error)
        while cell.queue:
            delivery = cell.queue.popleft()
            cell.mailbox.release()
            delivery.finished()
            self._lifecycle.message_finished()
            self._failures.undeliverable(cell.agent_id, delivery.message, error)
        cell.queue = None

    async def _handle_traced(self, agent: Agent, delivery: Delivery) -> None:
        """Handle one delivery inside its `process` span: a child of the publish span, linked to
        the publish's create span; the publish span waits for it no longer once it has ended."""
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
