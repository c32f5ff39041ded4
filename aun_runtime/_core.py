"""autogen-core runtimes as AUN transports: topic names, wire serializers, and the single-threaded core.

An [`AUNRuntime`][aun_runtime.AUNRuntime] carries messages over any autogen-core `AgentRuntime` (the
*core*). This module holds what every core needs:

* the topic mapping (`aun.inbox.<aid>` for direct messages, `aun.group.<gid>` for groups; the
  topic source is always `default`, so one AID is one agent instance and one mailbox);
* `WireSerializer`, which names every contract class on the wire by its namespaced wire name,
  not the bare `__name__` autogen-core would use (two `Task` classes must never collide);
* [`AUNSingleThreadedRuntime`][aun_runtime.AUNSingleThreadedRuntime]: autogen-core's single-threaded runtime with `send_message`
  refused before anything is queued (an intervention handler would make `stop_when_idle` hang in
  0.7.5), and a publish path without the spans, eager log formatting and event-log serialisation
  that cost most of a delivery when nobody is tracing. The embedded default is the faster
  [`AUNActorRuntime`][aun_runtime.AUNActorRuntime]; this one stays for code that needs autogen-core's own
  runtime (interventions, `process_next`) under the AUN rules.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, ClassVar

from autogen_core import (
    EVENT_LOGGER_NAME,
    JSON_DATA_CONTENT_TYPE,
    Agent,
    AgentId,
    AgentRuntime,
    CancellationToken,
    MessageContext,
    MessageHandlerContext,
    SingleThreadedAgentRuntime,
    TopicId,
)

# A private class of the pinned autogen-core (0.7.5): the lean publish path puts the same envelopes
# on the same queue. tests/test_core.py fails loudly if a new version moves any of it.
from autogen_core._single_threaded_agent_runtime import PublishMessageEnvelope
from opentelemetry.trace import TracerProvider
from pydantic import BaseModel

from protocols.aun import AUNMessage
from protocols.contract import contract_classes

from ._aun_core import AUNCore, MailboxProvider, UndeliverableHook
from ._errors import RuntimeStoppedError
from ._mailbox import MailboxOptions
from ._no_rpc import RefusesRPC

__all__ = [
    "AUNSingleThreadedRuntime",
    "InProcessCore",
    "WireSerializer",
    "group_topic",
    "group_topic_type",
    "inbox_topic",
    "inbox_topic_type",
    "register_wire_serializers",
]

TOPIC_SOURCE = "default"
INBOX_PREFIX = "aun.inbox."
GROUP_PREFIX = "aun.group."


def inbox_topic_type(aid: str) -> str:
    return INBOX_PREFIX + aid


def group_topic_type(group_id: str) -> str:
    return GROUP_PREFIX + group_id


#: TopicIds and AgentIds kept for the most recently addressed AIDs and groups. Building one runs a
#: regular expression (autogen-core validates every id), which costs as much as routing the message.
ID_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=ID_CACHE_SIZE)
def inbox_topic(aid: str) -> TopicId:
    return TopicId(INBOX_PREFIX + aid, TOPIC_SOURCE)


@functools.lru_cache(maxsize=ID_CACHE_SIZE)
def group_topic(group_id: str) -> TopicId:
    return TopicId(GROUP_PREFIX + group_id, TOPIC_SOURCE)


@functools.lru_cache(maxsize=ID_CACHE_SIZE)
def agent_id(aid: str) -> AgentId:
    return AgentId(aid, TOPIC_SOURCE)


class WireSerializer:
    """A JSON serializer for a pydantic message class, keyed by the class's namespaced wire name."""

    def __init__(self, cls: type[BaseModel], wire_name: str) -> None:
        self._cls = cls
        self._wire_name = wire_name

    @property
    def data_content_type(self) -> str:
        return JSON_DATA_CONTENT_TYPE

    @property
    def type_name(self) -> str:
        return self._wire_name

    def serialize(self, message: Any) -> bytes:
        if isinstance(message, AUNMessage):
            return message.to_json().encode()
        return message.model_dump_json().encode()  # type: ignore[no-any-return]

    def deserialize(self, payload: bytes) -> Any:
        return self._cls.model_validate_json(payload)


def register_wire_serializers(core: AgentRuntime) -> None:
    """Register the envelope and every contract class defined so far, under their wire names.

    autogen-core only registers the types an agent *handles*; a worker also needs the types it
    *publishes*, or a flow stalls with a log line. So every contract class goes in, up front.
    """
    serializers: list[WireSerializer] = [WireSerializer(AUNMessage, AUNMessage.wire_name)]
    serializers += [WireSerializer(cls, cls.wire_name) for cls in contract_classes()]
    core.add_message_serializer(serializers)


class InProcessCore:
    """What a core whose agents all live in this process says of itself to the facade: it keeps no
    archive of its own and has no directory of AIDs held elsewhere."""

    @property
    def archive(self) -> None:
        """None: the facade keeps the archive."""
        return None

    @property
    def directory(self) -> None:
        """None: every AID and group is in this process."""
        return None


class AUNSingleThreadedRuntime(RefusesRPC, InProcessCore, SingleThreadedAgentRuntime):
    """autogen-core's single-threaded runtime with AUN rules: no RPC, no wasted per-delivery work.

    Args:
        tracer_provider: an OpenTelemetry tracer provider. With one, every publish goes through
            autogen-core's own traced path, so spans keep autogen-core's names and existing
            dashboards work. Without one (the default), publishes take a lean path: same queue,
            same subscriptions, same handler calls, no spans and no eager log formatting.
    """

    #: It runs a task per message: the AUN facade applies each agent's mailbox at delivery time.
    drains_mailboxes: ClassVar[bool] = False

    def __init__(self, *, tracer_provider: TracerProvider | None = None) -> None:
        super().__init__(tracer_provider=tracer_provider)
        self._lean = tracer_provider is None
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
    ) -> None:
        """Hear about messages still queued at `stop()` (mailboxes are applied by the facade)."""
        self._on_undeliverable = on_undeliverable

    async def stop(self) -> None:
        """Stop now. autogen-core drops what is still queued without a word; here each queued
        publish is reported to `on_undeliverable` (once per recipient) before it is dropped.
        Handlers already running finish, as in autogen-core."""
        hook = self._on_undeliverable
        while hook is not None:
            try:
                envelope = self._message_queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            if isinstance(envelope, PublishMessageEnvelope):
                stopped = RuntimeStoppedError("the runtime stopped before this message was handled")
                for recipient in await self._subscription_manager.get_subscribed_recipients(envelope.topic_id):
                    if recipient != envelope.sender:
                        hook(recipient, envelope.message, stopped)
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
        if not self._lean:
            await super().publish_message(
                message, topic_id, sender=sender, cancellation_token=cancellation_token, message_id=message_id
            )
            return
        await self._message_queue.put(
            PublishMessageEnvelope(
                message=message,
                cancellation_token=cancellation_token or CancellationToken(),
                sender=sender,
                topic_id=topic_id,
                message_id=message_id or uuid.uuid4().hex,
            )
        )

    async def _process_publish(self, message_envelope: PublishMessageEnvelope) -> None:
        if not self._lean:
            await super()._process_publish(message_envelope)
            return
        # The queue this envelope came from: stop() replaces the runtime's queue, and a handler
        # still running then must not mark a task done on the new one (autogen-core 0.7.5 does,
        # and raises "task_done() called too many times", upstream #7007).
        queue = self._message_queue
        try:
            deliveries: list[Awaitable[Any]] = []
            sender = message_envelope.sender
            for recipient in await self._subscription_manager.get_subscribed_recipients(
                message_envelope.topic_id
            ):
                if sender is not None and recipient == sender:
                    continue  # a publish is never delivered back to its sender
                context = MessageContext(
                    sender=sender,
                    topic_id=message_envelope.topic_id,
                    is_rpc=False,
                    cancellation_token=message_envelope.cancellation_token,
                    message_id=message_envelope.message_id,
                )
                try:
                    agent = await self._get_agent(recipient)
                except Exception as exc:  # one recipient that cannot be created costs no one else a copy
                    logger.error("cannot deliver to %s: %s", recipient, exc, exc_info=exc)
                    continue
                deliveries.append(_deliver(agent, message_envelope.message, context))
            if len(deliveries) == 1:
                await deliveries[0]  # one recipient (every direct message): no task to spare
            else:
                await asyncio.gather(*deliveries)
        except BaseException as exc:
            logger.error("error delivering a publish on %s", message_envelope.topic_id, exc_info=exc)
            if not self._ignore_unhandled_handler_exceptions:
                self._background_exception = exc
        finally:
            queue.task_done()

    def _try_serialize(self, message: Any) -> str:
        # autogen-core serialises every message up to three times per delivery for its event log,
        # even when nobody listens. Only pay for it when the event logger is on.
        if _EVENT_LOGGER.isEnabledFor(logging.INFO):
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


async def _deliver(agent: Agent, message: Any, context: MessageContext) -> Any:
    with MessageHandlerContext.populate_context(agent.id):
        return await agent.on_message(message, ctx=context)


logger = logging.getLogger("aun_runtime")
_EVENT_LOGGER = logging.getLogger(EVENT_LOGGER_NAME)

if TYPE_CHECKING:
    # mypy holds the runtime to what the facade needs of its core, member by member.
    _as_core: AUNCore = AUNSingleThreadedRuntime()
