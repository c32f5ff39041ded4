"""Publishing on the actor runtime: a publish's recipients, their mailboxes' admission, their queues.

A publish asks the subscription index which agents a topic reaches, admits the message to each
recipient's mailbox (waiting for room under `block`, in recipient order), queues it on the
recipient's cell and starts the cell's drain if it has none. A publish seen by intervention
handlers or traced takes `publish_observed` first. It is apart from the drain (which hands queued
messages to the agent) and from the agents' registration and creation (asked only for a new cell).

Everything here runs once per delivery. The parts it calls are held as objects and their methods
called on them (`self._drains.start(cell)`): Python 3.11 specialises a method looked up on a class,
not a bound method kept in an attribute, which costs a generic lookup per call.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from autogen_core import AgentId, MessageContext, TopicId

from ..base._errors import MailboxFullError, MessageDroppedError
from ._actor_agents import ActorAgents
from ._actor_cell import Cell, Delivery
from ._actor_drain import ActorDrains
from ._actor_failures import DeliveryFailures
from ._actor_lifecycle import ActorLifecycle
from ._actor_tracing import PublishTrace, RuntimeTracer
from ._intervention import PublishInterventions, begin_publish, detached
from ._subscription_index import SubscriptionIndex

__all__ = ["ActorPublisher"]

logger = logging.getLogger("aun_runtime")


def _log_name(agent_id: AgentId) -> str:
    """`agent_id` as log lines name it: its type alone under autogen-core's default key (every AUN
    agent's: the type is its AID), else `type/key`."""
    return agent_id.type if agent_id.key == "default" else str(agent_id)


class ActorPublisher:
    """Routes one runtime's publishes to its agents' cells.

    Args:
        cells: the runtime's cells, by agent.
        routes: the runtime's subscriptions (which agents a topic reaches).
        lifecycle: the runtime's lifecycle (whether it runs; the count of unfinished messages).
        failures: where a message that will not be handled is reported.
        agents: the runtime's agents (asked for the cell of an agent that has none yet).
        drains: the runtime's drains (asked to start the drain of a cell that has none).
        interventions: the runtime's intervention handlers, or None.
        tracer: the runtime's tracer, or None when tracing is off.
    """

    __slots__ = ("_agents", "_cells", "_drains", "_failures", "_interventions", "_lifecycle", "_routes", "_tracer")

    def __init__(
        self,
        cells: dict[AgentId, Cell],
        routes: SubscriptionIndex,
        lifecycle: ActorLifecycle,
        failures: DeliveryFailures,
        *,
        agents: ActorAgents,
        drains: ActorDrains,
        interventions: PublishInterventions | None,
        tracer: RuntimeTracer | None,
    ) -> None:
        self._cells = cells
        self._routes = routes
        self._lifecycle = lifecycle
        self._failures = failures
        self._agents = agents
        self._drains = drains
        self._interventions = interventions
        self._tracer = tracer

    def route(self, delivery: Delivery, topic_id: TopicId, sender: AgentId | None) -> list[AgentId] | None:
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
                cell = self._agents.new_cell(agent_id, delivery.message)
                if cell is None:
                    continue
            if cell.mailbox.take_if_room(message_id):
                self._enqueue(cell, delivery)
            else:
                waiting = [agent_id]
        return waiting

    async def route_waiting(self, delivery: Delivery, recipients: list[AgentId]) -> None:
        """Queue `delivery` for `recipients` in turn (those `route` returned), each once its
        mailbox has room; one that stays full reports the message undeliverable."""
        message_id = delivery.ctx.message_id
        sender = delivery.ctx.sender
        publisher = None if sender is None else _log_name(sender)  # named in a full-mailbox warning
        for agent_id in recipients:
            cell = self._cells.get(agent_id) or self._agents.new_cell(agent_id, delivery.message)
            if cell is None:
                continue
            mailbox = cell.mailbox
            if mailbox.owner is None:  # named only once it makes someone wait: no string per cell
                mailbox.owner = _log_name(agent_id)
            # The wait is on the mailbox, which outlives its cell: the cell may be replaced meanwhile
            # (a place promised to us keeps it from being dropped once we have it).
            if not await mailbox.enter(message_id, publisher):
                self._failures.undeliverable(
                    agent_id,
                    delivery.message,
                    MailboxFullError(f"{agent_id}: mailbox full ({cell.mailbox.capacity} messages)"),
                )
                if cell.agent is None:
                    self._lifecycle.went_idle(cell)  # a cell made for this message alone goes with it
                continue
            cell = self._cells.get(agent_id) or self._agents.new_cell(agent_id, delivery.message)
            if cell is not None:
                if delivery.trace is not None:
                    delivery.trace.hold()  # the publish span waits for this copy too
                self._enqueue(cell, delivery)

    async def publish_observed(self, message: Any, topic_id: TopicId, ctx: MessageContext) -> None:
        """A publish with intervention handlers, or traced (autogen-core's spans, in its tree: see
        `aun_runtime.core._actor_tracing`), or both."""
        helper = self._tracer.helper if self._tracer is not None else None
        result, created = await begin_publish(message, topic_id, ctx, self._interventions, helper)
        if isinstance(result, MessageDroppedError):
            self._dropped(message, result, topic_id, ctx.sender)
            return
        message = result
        if helper is None or created is None:
            delivery = Delivery(message, ctx)
            waiting = self.route(delivery, topic_id, ctx.sender)
            if waiting:
                await self.route_waiting(delivery, waiting)
            return
        with detached(), helper.trace_block("publish", topic_id, parent=created, end_on_exit=False) as span:
            trace = PublishTrace(created, span)
        delivery = Delivery(message, ctx, trace)
        try:
            lifecycle = self._lifecycle
            queued = lifecycle.unfinished
            waiting = self.route(delivery, topic_id, ctx.sender)
            # route awaits nothing, so no delivery can have finished meanwhile: what it added to
            # the count is exactly what it queued (counting here keeps _enqueue free of tracing).
            trace.hold(lifecycle.unfinished - queued)
            if waiting:
                await self.route_waiting(delivery, waiting)
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
            self._failures.undeliverable(agent_id, message, error)

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
            self._drains.start(cell)
