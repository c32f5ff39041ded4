"""AUN over autogen-core topics: the topic names and wire serializers every core and sender needs.

An [`AUNRuntime`][aun_runtime.AUNRuntime] carries messages over any autogen-core `AgentRuntime` (the
*core*). This module holds what every part of that needs, and no core:

* the topic mapping (`aun.inbox.<aid>` for each AID; a group post is a copy on each member's
  inbox topic, see `aun_runtime.delivery._fan_out`; the topic source is always `default`, so one AID is
  one agent instance and one mailbox). `aun.group.` names the group topics a distributed host
  still lets through;
* `WireSerializer`, which names every contract class on the wire by its namespaced wire name,
  not the bare `__name__` autogen-core would use (two `Task` classes must never collide).

What a core is: `aun_runtime.delivery._core_protocol`; the cores themselves: `aun_runtime.core._actor_runtime`,
`aun_runtime.core._single_threaded` and `aun_runtime.distributed._worker`.
"""

from __future__ import annotations

import functools
from typing import Any

from autogen_core import JSON_DATA_CONTENT_TYPE, AgentId, AgentRuntime, TopicId
from pydantic import BaseModel

from protocols.aun import AUNMessage
from protocols.contract import contract_classes

__all__ = [
    "WireSerializer",
    "inbox_topic",
    "inbox_topic_type",
    "register_wire_serializers",
]

TOPIC_SOURCE = "default"
INBOX_PREFIX = "aun.inbox."
GROUP_PREFIX = "aun.group."


def inbox_topic_type(aid: str) -> str:
    return INBOX_PREFIX + aid


#: TopicIds and AgentIds kept for the most recently addressed AIDs and groups. Building one runs a
#: regular expression (autogen-core validates every id), which costs as much as routing the message.
ID_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=ID_CACHE_SIZE)
def inbox_topic(aid: str) -> TopicId:
    return TopicId(INBOX_PREFIX + aid, TOPIC_SOURCE)


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
