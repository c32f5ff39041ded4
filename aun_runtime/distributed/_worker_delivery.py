"""The receiving path of a worker: from an event on the host stream to an agent's handler and back.

Each delivery runs in its own task (as in autogen-ext), inside a `Delivery` scope
that holds what the handling causes until it is sealed; sealing puts the records, the outgoing
messages and the stream position into one commit (see `._journal`). A delivery cancelled
half-way (the worker stopping) leaves nothing behind and is not acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from autogen_core import Agent, AgentId, CancellationToken, MessageContext, MessageHandlerContext, TopicId
from autogen_ext.runtimes.grpc.protos import cloudevent_pb2
from opentelemetry import context as otel_context
from opentelemetry.trace import Tracer

from protocols.aun import AUNMessage

from ..base._autogen_internals import SerializationRegistry
from ..base._trace_context import TRACEPARENT_KEY, context_of, well_formed
from ..core._actor_tracing import RuntimeTracer
from ..delivery._turn_spans import note_sent_from
from ..storage._archive import RecordKind
from ._inbound import Inbound
from ._journal import DELIVERY, Delivery, JournalArchive
from ._outbox import Outbox
from ._wire import CREATED_ATTR

__all__ = ["DeliveryPath", "Deserializer"]

logger = logging.getLogger("aun_runtime.distributed")


class Deserializer(Protocol):
    """Turns an event's payload into the message it carries (autogen-core's serialization registry)."""

    def __call__(self, payload: bytes, *, type_name: str, data_content_type: str) -> Any: ...


class DeliveryPath:
    """Hands deliveries to agents, one task each, and seals what they did.

    Args:
        worker_name: the receiving worker's name (for the log).
        archive: the worker's journal; a delivery's records wait in it until sealed.
        outbox: where the messages a handling sent go once it is sealed.
        inbound: the stream positions a sealed delivery moves.
        deserialize: decodes a payload that is not an AUN message.
        subscribers: the agents subscribed to a topic (for a plain autogen-ext publish).
        get_agent: the agent of an id, made by its factory on first use.
        tracer: makes the `aun deliver` span of each delivery when given.
        runtime_tracer: makes autogen-core's `process` span around it when given.
        serializers: the worker's serializers (a traced `process` span shows the message as JSON).
        changed: called whenever a delivery finishes (for the worker's `idle`).
        abandoned: called with a delivery cancelled half-way (a service AID's claim waits for it).
    """

    def __init__(
        self,
        worker_name: str,
        archive: JournalArchive,
        outbox: Outbox,
        inbound: Inbound,
        *,
        deserialize: Deserializer,
        subscribers: Callable[[TopicId], Awaitable[Sequence[AgentId]]],
        get_agent: Callable[[AgentId], Awaitable[Agent]],
        tracer: Tracer | None,
        changed: Callable[[], None],
        abandoned: Callable[[Delivery], None] = lambda scope: None,
        runtime_tracer: RuntimeTracer | None = None,
        serializers: SerializationRegistry | None = None,
    ) -> None:
        self._worker_name = worker_name
        self._archive = archive
        self._outbox = outbox
        self._inbound = inbound
        self._deserialize = deserialize
        self._subscribers = subscribers
        self._get_agent = get_agent
        self._tracer = tracer
        self._runtime_tracer = runtime_tracer
        self._serializers = serializers or SerializationRegistry()
        self._changed = changed
        self._abandoned = abandoned
        self.busy = 0
        self.handled = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, scope: Delivery | None, event: cloudevent_pb2.CloudEvent) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(self._deliver(scope, event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def cancel(self) -> None:
        """Abandon every delivery in progress (the worker is stopping)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _deliver(self, scope: Delivery | None, event: cloudevent_pb2.CloudEvent) -> None:
        self.busy += 1
        DELIVERY.set(scope)
        finished = False
        try:
            await self._handle(scope, event)
            finished = True
        except Exception as exc:  # the runtime's own failure: the handling is recorded, never silent
            owner = scope.aid if scope is not None else event.type
            self._archive.record_event(owner, RecordKind.DEAD_LETTER, f"{type(exc).__name__}: {exc}", None)
            logger.error("worker %s: could not deliver %s: %s", self._worker_name, event.type, exc, exc_info=exc)
            finished = True
        finally:
            if scope is not None and finished:
                self._seal(scope)
            elif scope is not None:
                # Cancelled half-way (the worker is stopping): nothing of it is kept, nothing is
                # acknowledged, and its sender sends it again to the next run of this worker.
                self._archive.abandon(scope)
                scope.sends.clear()
                self._abandoned(scope)
            self.busy -= 1
            if not self.busy:
                self._archive.commit_soon()
            self._changed()

    async def _handle(self, scope: Delivery | None, event: cloudevent_pb2.CloudEvent) -> None:
        attributes = event.attributes
        schema = attributes["dataschema"].ce_string
        if schema == AUNMessage.wire_name:
            message: Any = AUNMessage.model_validate_json(event.binary_data)
        else:
            message = self._deserialize(
                event.binary_data, type_name=schema, data_content_type=attributes["datacontenttype"].ce_string
            )
        sender = AgentId(attributes["agagentsendertype"].ce_string, attributes["agagentsenderkey"].ce_string)
        topic_id = TopicId(event.type, event.source)
        if scope is not None:
            recipients = [AgentId(scope.aid, "default")]
        else:
            subscribed = await self._subscribers(topic_id)
            recipients = [r for r in subscribed if r != sender]
        for recipient in recipients:
            try:
                agent = await self._get_agent(recipient)
            except Exception as exc:  # the others still get it; this one is a dead letter
                logger.error("Error constructing agent %s", recipient, exc_info=True)  # autogen-core's words
                envelope = message if isinstance(message, AUNMessage) else None
                self._archive.record_event(recipient.type, RecordKind.DEAD_LETTER, f"{type(exc).__name__}: {exc}", envelope)
                continue
            ctx = MessageContext(
                sender=sender, topic_id=topic_id, is_rpc=False, cancellation_token=CancellationToken(), message_id=event.id
            )
            with MessageHandlerContext.populate_context(agent.id):
                if self._tracer is None:
                    await agent.on_message(message, ctx)
                else:
                    await self._traced(agent, message, ctx, attributes)

    async def _traced(self, agent: Agent, message: Any, ctx: MessageContext, attributes: Any) -> None:
        """The handling inside autogen-core's `process` span (a child of the span the sending worker
        sent it from, linked to its create span, when the event names them) with `aun deliver` in it."""
        assert self._tracer is not None
        sent_from = well_formed(attributes[TRACEPARENT_KEY].ce_string) if TRACEPARENT_KEY in attributes else None
        created = well_formed(attributes[CREATED_ATTR].ce_string) if CREATED_ATTR in attributes else None
        parent = context_of(sent_from) if sent_from is not None else None
        if created is not None and isinstance(message, AUNMessage):
            note_sent_from(message.message_id, created)  # its turn: a child of the sender's turn, in its trace
        with contextlib.ExitStack() as spans:
            if self._runtime_tracer is not None:
                token = otel_context.attach(parent if parent is not None else otel_context.Context())
                spans.callback(otel_context.detach, token)
                spans.enter_context(
                    self._runtime_tracer.helper.trace_block(
                        "process",
                        agent.id,
                        parent={TRACEPARENT_KEY: created} if created is not None else None,
                        attributes=self._runtime_tracer.process_attributes(
                            self._serializers, ctx.sender, None, agent.id, type(agent).__name__, ctx, message
                        ),
                    )
                )
                parent = None  # aun deliver: a child of process, the current span now
            spans.enter_context(self._tracer.start_as_current_span(f"aun deliver {agent.id.type}", context=parent))
            await agent.on_message(message, ctx)

    def _seal(self, scope: Delivery) -> None:
        for aid, event in scope.sends:
            self._outbox.append(aid, event)
        scope.sends.clear()
        # A service AID's delivery is journaled as handled on its own: this worker may hold only
        # part of its stream (see _service_inbound).
        position = None if scope.service else self._inbound.sealed(scope.origin, scope.aid, scope.seq)
        self._archive.seal(scope, position)
        self.handled += 1
