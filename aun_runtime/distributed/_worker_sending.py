"""What a worker publishes, on its way to the host: through the outbox, or as autogen-ext's plain publish.

Apart from the worker because it is the sending half of its traffic and holds nothing of the
session: a publish on `aun.inbox.<aid>` is kept in the durable outbox until acknowledged (inside a
handling, it waits for that handling's commit); any other topic goes to the host as a plain,
best-effort autogen-ext publish, which the worker waits for in `idle` when its own agents subscribe
to it (`._returning`). Intervention handlers and the `publish` span come first, when there are any.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Container, Sequence
from typing import Any

from autogen_core import AgentId, CancellationToken, MessageContext, TopicId
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2

from protocols.aun import AUNMessage

from ..base._errors import MessageDroppedError, OutboxFullError
from ..base._topics import INBOX_PREFIX
from ..core._actor_tracing import RuntimeTracer
from ..core._intervention import PublishInterventions, begin_publish, detached
from ..delivery._core_protocol import UndeliverableHook
from ..storage._archive import RecordKind
from ._cloud_events import EventBuilder
from ._journal import DELIVERY, JournalArchive
from ._outbox import Outbox
from ._returning import ReturningPublishes
from ._wire import AUN_PREFIX

__all__ = ["PublishPath"]


class PublishPath:
    """A worker's publishes, from `publish_message` to the outbox or the host stream.

    Args:
        archive: the worker's journal (dead letters; the commit an outbox append waits for).
        outbox: where messages to AIDs wait until acknowledged.
        events: builds the event a message travels in.
        send: puts a message on the host stream (False: no session now).
        returning: the plain publishes `idle` waits for.
        subscribers: the agents subscribed to a topic (autogen-ext's subscription manager).
        held: the agent types this worker holds.
        tracer: autogen-core's runtime spans, when traced.
        interventions: the intervention handlers, when there are any.
    """

    def __init__(
        self,
        archive: JournalArchive,
        outbox: Outbox,
        events: EventBuilder,
        *,
        send: Callable[[agent_worker_pb2.Message], bool],
        returning: ReturningPublishes,
        subscribers: Callable[[TopicId], Awaitable[Sequence[AgentId]]],
        held: Container[str],
        tracer: RuntimeTracer | None,
        interventions: PublishInterventions | None,
    ) -> None:
        self._archive = archive
        self._outbox = outbox
        self._events = events
        self._send = send
        self._returning = returning
        self._subscribers = subscribers
        self._held = held
        self._tracer = tracer
        self._interventions = interventions
        #: True when a publish goes straight to `send` (no tracing, no intervention handlers).
        self.plain = tracer is None and interventions is None
        #: Hears of a message an intervention handler dropped (the facade's hook), if attached.
        self.on_undeliverable: UndeliverableHook | None = None

    async def publish(
        self, message: Any, topic_id: TopicId, sender: AgentId | None, cancellation_token: CancellationToken | None,
        message_id: str,
    ) -> None:
        """Publish through the intervention handlers and in autogen-core's `publish` span: a message
        they drop never leaves."""
        helper = self._tracer.helper if self._tracer is not None else None
        ctx = MessageContext(sender, topic_id, False, cancellation_token or CancellationToken(), message_id)
        result, created = await begin_publish(message, topic_id, ctx, self._interventions, helper)
        if isinstance(result, MessageDroppedError):
            self._dropped(message, result, topic_id)
            return
        message = result
        if helper is None or created is None:
            await self.send(message, topic_id, sender, message_id)
            return
        # As autogen-core: publish is a root linked to create; the event names it as the parent of
        # the receiver's process span, and names create for that span to link to.
        with detached(), helper.trace_block("publish", topic_id, parent=created):
            await self.send(message, topic_id, sender, message_id, created=created.traceparent)

    def _dropped(self, message: Any, error: MessageDroppedError, topic_id: TopicId) -> None:
        """An intervention handler dropped `message`: a dead letter for the AID it was for (any
        other publish names its topic, since who subscribes is known only to the host)."""
        owner = topic_id.type[len(INBOX_PREFIX) :] if topic_id.type.startswith(INBOX_PREFIX) else topic_id.type
        if self.on_undeliverable is not None:
            self.on_undeliverable(AgentId(owner, "default"), message, error)
            return
        envelope = message if isinstance(message, AUNMessage) else None
        self._archive.record_event(owner, RecordKind.DEAD_LETTER, f"{type(error).__name__}: {error}", envelope)

    async def send(
        self, message: Any, topic_id: TopicId, sender: AgentId | None, message_id: str, created: str | None = None
    ) -> None:
        """Send `message` as it is (the handlers and spans are behind it): to the outbox or the host."""
        event = self._events.build(message, topic_id, sender, message_id, created=created)
        if not topic_id.type.startswith(INBOX_PREFIX):
            comes_back = await self._subscribed_here(topic_id)  # asked first: nothing can come back before
            if self._send(agent_worker_pb2.Message(cloudEvent=event)) and comes_back:
                self._returning.sent(message_id, asyncio.get_running_loop().time())
            return
        aid = topic_id.type[len(INBOX_PREFIX) :]
        if self._outbox.full:
            error = OutboxFullError(f"the outbox holds {self._outbox.capacity} unacknowledged messages; {aid} is not taking them")
            owner = message.from_aid if isinstance(message, AUNMessage) else aid
            self._archive.record_event(owner, RecordKind.DEAD_LETTER, f"OutboxFullError: {error}", message if isinstance(message, AUNMessage) else None)
            raise error
        scope = DELIVERY.get()
        if scope is not None and not scope.sealed:
            scope.sends.append((aid, event))  # leaves with the handling's commit, not before
            return
        self._outbox.append(aid, event)
        self._archive.request_commit()

    async def _subscribed_here(self, topic_id: TopicId) -> bool:
        """An agent this worker holds subscribes to `topic_id` (the runtime's own topics aside:
        the host keeps those to their owners)."""
        if topic_id.type.startswith(AUN_PREFIX):
            return False
        recipients = await self._subscribers(topic_id)
        return any(recipient.type in self._held for recipient in recipients)
