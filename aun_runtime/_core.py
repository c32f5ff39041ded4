"""autogen-core runtimes as AUN transports: topic names, wire serializers, and the single-threaded core.

An :class:`~aun_runtime.AUNRuntime` carries messages over any autogen-core ``AgentRuntime`` (the
*core*). This module holds what every core needs:

* the topic mapping (``aun.inbox.<aid>`` for direct messages, ``aun.group.<gid>`` for groups; the
  topic source is always ``default``, so one AID is one agent instance and one mailbox);
* :class:`WireSerializer`, which names every contract class on the wire by its namespaced wire name,
  not the bare ``__name__`` autogen-core would use (two ``Task`` classes must never collide);
* :class:`AUNSingleThreadedRuntime`, the embedded default core: autogen-core's single-threaded
  runtime with ``send_message`` refused before anything is queued (an intervention handler would
  make ``stop_when_idle`` hang in 0.7.5) and without the event-log serialisation nobody reads.
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn

from autogen_core import (
    EVENT_LOGGER_NAME,
    JSON_DATA_CONTENT_TYPE,
    AgentId,
    AgentRuntime,
    CancellationToken,
    SingleThreadedAgentRuntime,
    TopicId,
)
from pydantic import BaseModel

from protocols.aun import AUNMessage
from protocols.contract import contract_classes

from ._errors import RPCForbiddenError

__all__ = [
    "AUNSingleThreadedRuntime",
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


def inbox_topic(aid: str) -> TopicId:
    return TopicId(INBOX_PREFIX + aid, TOPIC_SOURCE)


def group_topic(group_id: str) -> TopicId:
    return TopicId(GROUP_PREFIX + group_id, TOPIC_SOURCE)


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


class AUNSingleThreadedRuntime(SingleThreadedAgentRuntime):
    """autogen-core's single-threaded runtime with AUN rules: no RPC, no wasted serialisation."""

    async def send_message(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> NoReturn:
        raise RPCForbiddenError()

    def _try_serialize(self, message: Any) -> str:
        # autogen-core serialises every message up to three times per delivery for its event log,
        # even when nobody listens. Only pay for it when the event logger is on.
        if _EVENT_LOGGER.isEnabledFor(logging.INFO):
            return super()._try_serialize(message)
        return ""

    async def idle(self) -> None:
        """Wait until every queued message, and everything it caused, has been handled."""
        await self._message_queue.join()


_EVENT_LOGGER = logging.getLogger(EVENT_LOGGER_NAME)
