"""`AUNSingleThreadedRuntime`: autogen-core's own single-threaded runtime under the AUN rules.

autogen-core's runtime with `send_message` refused before anything is queued, intervention
handlers' `on_publish` run as every core runs them (`aun_runtime.core._intervention`: a drop no
longer makes `stop_when_idle` hang, as it does on 0.7.5), a recipient that cannot be created
reported and kept as a handler's failure is, and a publish path without the spans, eager log
formatting and event-log serialisation that cost most of a delivery when nobody is tracing. The
embedded default is the faster [`AUNActorRuntime`][aun_runtime.AUNActorRuntime]; this one stays for code that
needs autogen-core's own runtime (its one queue, `process_next`) under the AUN rules.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from autogen_core import (
    EVENT_LOGGER_NAME,
    Agent,
    AgentId,
    CancellationToken,
    InterventionHandler,
    MessageContext,
    MessageHandlerContext,
    SingleThreadedAgentRuntime,
    TopicId,
)

# A private class of the pinned autogen-core (0.7.5): the lean publish path puts the same envelopes
# on the same queue. tests/core/test_core.py fails loudly if a new version moves any of it.
from opentelemetry.trace import TracerProvider

from ..base._autogen_internals import PublishMessageEnvelope
from ..base._errors import AgentCreationError, MessageDroppedError, RuntimeStoppedError
from ..delivery._core_protocol import (
    AUNCore,
    InProcessCore,
    MailboxProvider,
    MailboxReleasedHook,
    UndeliverableHook,
)
from ..delivery._mailbox import MailboxOptions
from ._actor_failures import report_undeliverable
from ._actor_tracing import tracing_provider
from ._intervention import PublishInterventions, begin_publish
from ._no_rpc import RefusesRPC

__all__ = ["AUNSingleThreadedRuntime"]


@dataclass(kw_only=True)
class _CopiesEnvelope(PublishMessageEnvelope):
    """A group post's copies, each on its member's inbox topic (`topic_id` is the first): one queue
    entry and one task for all of them, as one publish on a group topic was."""

    topic_ids: Sequence[TopicId]


class AUNSingleThreadedRuntime(RefusesRPC, InProcessCore, SingleThreadedAgentRuntime):
    """autogen-core's single-threaded runtime with AUN rules: no RPC, no wasted per-delivery work.

    It takes autogen-core's constructor arguments, with the same meaning:

    Args:
        intervention_handlers: autogen-core intervention handlers; their `on_publish` sees (and may
            change or drop) every message published, before it is queued; a message one drops is a
            dead letter for each agent it would have reached. A handler without `on_publish` is
            refused with
            [`InterventionHandlerError`][aun_runtime.InterventionHandlerError].
        tracer_provider: an OpenTelemetry tracer provider; without one, the global provider if an
            OpenTelemetry SDK one is installed (as autogen-core). When tracing, spans are
            autogen-core's own, names, attributes and tree, so existing dashboards work. When not
            (the default), publishes take a lean path: same queue, same subscriptions, same handler
            calls, no spans and no eager log formatting.
        ignore_unhandled_exceptions: if False, the first exception a handler raises, or an agent's
            creation for a message raises, is raised again by `stop`/`stop_when_idle`, as on
            autogen-core. Either way a recipient that cannot be created is reported undeliverable.
    """

    #: It runs a task per message: the AUN facade applies each agent's mailbox at delivery time.
    drains_mailboxes: ClassVar[bool] = False

    def __init__(
        self,
        *,
        intervention_handlers: Sequence[InterventionHandler] | None = None,
        tracer_provider: TracerProvider | None = None,
        ignore_unhandled_exceptions: bool = True,
    ) -> None:
        # autogen-core's own loop is given no handlers: on_publish runs in publish_message here,
        # where a drop leaves nothing queued (in 0.7.5 a drop is never marked done, and
        # stop_when_idle hangs), and its on_send/on_response can never run.
        super().__init__(
            tracer_provider=tracer_provider, ignore_unhandled_exceptions=ignore_unhandled_exceptions
        )
        self._lean = tracing_provider(tracer_provider) is None
        self._interventions = PublishInterventions(intervention_handlers) if intervention_handlers else None
        # The one test a publish makes: untraced and without interventions, it does no work for either.
        self._plain = self._lean and self._interventions is None
        self._on_undeliverable: UndeliverableHook | None = None

    @property
    def mailbox_options(self) -> MailboxOptions | None:
        """None: this runtime makes no mailboxes (the facade applies its own at delivery)."""
        return None

    def attach(
        self,
        *,
        mailbox_provider: MailboxProvider | None = None,
        on_undeliverable: UndeliverableHook | None = None,
        on_mailbox_released: MailboxReleasedHook | None = None,
    ) -> None:
        """Hear about messages still queued at `stop()` (mailboxes are applied by the facade)."""
        self._on_undeliverable = on_undeliverable

    async def stop(self) -> None:
        """Stop now. autogen-core drops what is still queued without a word; here each queued
        publish is reported to `on_undeliverable` (once per recipient) before it is dropped.
        Handlers already running finish, as in autogen-core."""
        while self._on_undeliverable is not None:
            try:
                envelope = self._message_queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            if isinstance(envelope, PublishMessageEnvelope):
                stopped = RuntimeStoppedError("the runtime stopped before this message was handled")
                topics = envelope.topic_ids if isinstance(envelope, _CopiesEnvelope) else (envelope.topic_id,)
                for topic_id in topics:
                    for recipient in await self._recipients(topic_id, envelope.sender):
                        self._report(recipient, envelope.message, stopped)
        await super().stop()

    async def publish_message(
        self,
        message: Any,
        topic_id: TopicId,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> None:
        if self._plain:
            await self._message_queue.put(
                PublishMessageEnvelope(
                    message=message,
                    cancellation_token=cancellation_token or CancellationToken(),
                    sender=sender,
                    topic_id=topic_id,
                    message_id=message_id or uuid.uuid4().hex,
                )
            )
        elif self._interventions is not None:
            await self._publish_intervened(message, topic_id, sender, cancellation_token, message_id)
        else:
            await super().publish_message(
                message, topic_id, sender=sender, cancellation_token=cancellation_token, message_id=message_id
            )

    async def publish_copies(
        self, message: Any, topic_ids: Sequence[TopicId], *, sender: AgentId | None = None, message_id: str
    ) -> None:
        """Publish `message` on each of `topic_ids`, as that many `publish_message` calls would: one
        queue entry for all of them on the lean path, delivered in the order given (each recipient
        in a task of its own, as a publish on a group topic is). Traced or intervened, one publish
        per copy, so that each has its span and meets the handlers."""
        if not self._plain:
            for topic_id in topic_ids:
                await self.publish_message(message, topic_id, sender=sender, message_id=message_id)
            return
        await self._message_queue.put(
            _CopiesEnvelope(
                message=message,
                cancellation_token=CancellationToken(),
                sender=sender,
                topic_id=topic_ids[0],
                topic_ids=topic_ids,
                message_id=message_id,
            )
        )

    async def _publish_intervened(
        self,
        message: Any,
        topic_id: TopicId,
        sender: AgentId | None,
        cancellation_token: CancellationToken | None,
        message_id: str | None,
    ) -> None:
        """A publish through the intervention handlers, queued only if none dropped it."""
        token = cancellation_token or CancellationToken()
        ctx = MessageContext(sender, topic_id, False, token, message_id or str(uuid.uuid4()))
        tracer = None if self._lean else self._tracer_helper
        result, created = await begin_publish(message, topic_id, ctx, self._interventions, tracer)
        if isinstance(result, MessageDroppedError):
            for recipient in await self._recipients(topic_id, sender):
                self._report(recipient, message, result)
            return
        await self._message_queue.put(
            PublishMessageEnvelope(
                message=result,
                cancellation_token=ctx.cancellation_token,
                sender=sender,
                topic_id=topic_id,
                metadata=created,
                message_id=ctx.message_id,
            )
        )

    async def _recipients(self, topic_id: TopicId, sender: AgentId | None) -> list[AgentId]:
        """Who a publish on `topic_id` reaches: every subscribed agent but its sender."""
        recipients = await self._subscription_manager.get_subscribed_recipients(topic_id)
        return [recipient for recipient in recipients if recipient != sender]

    async def _process_publish(self, message_envelope: PublishMessageEnvelope) -> None:
        # The queue this envelope came from: stop() replaces the runtime's queue, and a handler
        # still running then must not mark a task done on the new one (autogen-core 0.7.5 does,
        # and raises "task_done() called too many times", upstream #7007).
        queue = self._message_queue
        try:
            if self._lean:
                await self._deliver_publish(message_envelope)
            else:  # autogen-core's span: its own loop runs this in no span, so it is a root, linked to create
                with self._tracer_helper.trace_block(
                    "publish", message_envelope.topic_id, parent=message_envelope.metadata
                ):
                    await self._deliver_publish(message_envelope)
        except BaseException as exc:
            logger.error("error delivering a publish on %s", message_envelope.topic_id, exc_info=exc)
            if not self._ignore_unhandled_handler_exceptions:
                self._background_exception = exc
        finally:
            queue.task_done()

    async def _deliver_publish(self, envelope: PublishMessageEnvelope) -> None:
        """Hand a publish to each recipient, each in a task of its own, as autogen-core does."""
        deliveries: list[Awaitable[Any]] = []
        sender = envelope.sender
        instances = self._instantiated_agents
        recipients_of = self._subscription_manager.get_subscribed_recipients
        topics = envelope.topic_ids if isinstance(envelope, _CopiesEnvelope) else (envelope.topic_id,)
        for topic_id in topics:
            for recipient in await recipients_of(topic_id):
                if recipient == sender:
                    continue  # a publish is never delivered back to its sender
                context = MessageContext(
                    sender=sender,
                    topic_id=topic_id,
                    is_rpc=False,
                    cancellation_token=envelope.cancellation_token,
                    message_id=envelope.message_id,
                )
                agent = instances.get(recipient)  # the usual case, without a coroutine
                if agent is None:
                    try:
                        agent = await self._recipient(recipient)
                    except Exception as exc:  # one recipient that cannot be created costs no one else a copy
                        self._creation_failed(recipient, envelope.message, exc)
                        continue
                deliveries.append(self._deliver(agent, envelope, context))
        if len(deliveries) == 1:
            await deliveries[0]  # one recipient (every direct message): no task to spare
        else:
            # Every handler runs to its end before the publish counts as done (autogen-core's gather
            # gives up at the first failure, and stop_when_idle may return while the others run).
            for outcome in await asyncio.gather(*deliveries, return_exceptions=True):
                if isinstance(outcome, BaseException):
                    raise outcome

    async def _recipient(self, recipient: AgentId) -> Agent:
        """A recipient not instantiated yet, created; an `AgentCreationError` if it cannot be."""
        if recipient.type not in self._agent_factories:
            raise AgentCreationError.unregistered(recipient, recipient.type)
        if recipient.type in self._agent_instance_types:
            raise AgentCreationError.instances_only(recipient, recipient.type)
        return await self._get_agent(recipient)  # a factory's failure is logged there, as autogen-core does

    async def _deliver(self, agent: Agent, envelope: PublishMessageEnvelope, context: MessageContext) -> Any:
        if self._lean:
            with MessageHandlerContext.populate_context(agent.id):
                return await agent.on_message(envelope.message, ctx=context)
        attributes = await self._create_otel_attributes(
            sender_agent_id=envelope.sender,
            recipient_agent_id=agent.id,
            message_context=context,
            message=envelope.message,
        )
        # A child of the publish span (the task it runs in was started inside it), linked to create.
        with (
            self._tracer_helper.trace_block(
                "process", agent.id, parent=envelope.metadata, attributes=attributes
            ),
            MessageHandlerContext.populate_context(agent.id),
        ):
            return await agent.on_message(envelope.message, ctx=context)

    def _creation_failed(self, recipient: AgentId, message: Any, error: Exception) -> None:
        """A recipient could not be created: it is reported, and kept as a handler's failure is."""
        if self._on_undeliverable is not None:
            self._report(recipient, message, error)
        else:
            logger.error("cannot deliver to %s: %s", recipient, error)
        if not self._ignore_unhandled_handler_exceptions and self._background_exception is None:
            self._background_exception = error

    def _report(self, recipient: AgentId, message: Any, error: BaseException) -> None:
        """Pass what could not be delivered to the hook (a hook that raises is logged), or log it."""
        report_undeliverable(self._on_undeliverable, recipient, message, error)

    def _try_serialize(self, message: Any) -> str:
        # autogen-core serialises every message up to three times per delivery for its event log,
        # even when nobody listens. Only pay for it when the event logger is on, or when tracing
        # (a process span shows the message).
        if not self._lean or _EVENT_LOGGER.isEnabledFor(logging.INFO):
            return super()._try_serialize(message)
        return ""

    async def idle(self) -> None:
        """Wait until every queued message, and everything it caused, has been handled."""
        await self._message_queue.join()

    async def close(self) -> None:
        """Stop if running (reporting what is still queued, as `stop()` does), then close every
        agent instance and let it go. A second `close()` finds nothing left and does nothing.

        The instances are closed even if `stop()` raises (a handler's exception); an agent whose
        `close` raises is logged and the others are still closed."""
        try:
            if self._run_context is not None:
                await self.stop()
        finally:
            instances = self._instantiated_agents
            for agent_id in list(instances):
                agent = instances.pop(agent_id)
                try:
                    await agent.close()
                except Exception:
                    logger.warning("closing %s failed", agent_id, exc_info=True)


logger = logging.getLogger("aun_runtime")
_EVENT_LOGGER = logging.getLogger(EVENT_LOGGER_NAME)

if TYPE_CHECKING:
    # mypy holds the runtime to what the facade needs of its core, member by member.
    _as_core: AUNCore = AUNSingleThreadedRuntime()
