"""Building the CloudEvent that carries a message from this worker, cheaply.

An event's attributes (content type, schema, sender, origin worker) are the same for every message
from one sender to one recipient; building their protobuf map costs more than the rest of the send.
So each combination is built once, and every message copies it and adds its id and data.
"""

from __future__ import annotations

from typing import Any, Protocol

from autogen_core import JSON_DATA_CONTENT_TYPE, AgentId, TopicId
from autogen_ext.runtimes.grpc.protos import cloudevent_pb2

from protocols.aun import AUNMessage

from ..base._trace_context import TRACEPARENT_KEY, current_traceparent
from ._wire import CREATED_ATTR, ORIGIN_ATTR

__all__ = ["EventBuilder", "Serializers"]

_Attr = cloudevent_pb2.CloudEvent.CloudEventAttributeValue
_UNKNOWN_SENDER = AgentId("unknown", "unknown")
#: Prepared events kept per (topic, sender, type): about one per recipient AID. Cleared when full,
#: which only costs building them again.
TEMPLATE_CACHE = 4096


class Serializers(Protocol):
    """Names and encodes a message that is not an AUN envelope (autogen-core's serialization registry)."""

    def type_name(self, message: Any) -> str: ...

    def serialize(self, message: Any, *, type_name: str, data_content_type: str) -> bytes: ...


class EventBuilder:
    """Makes the events a worker publishes.

    Args:
        origin: the worker's name, carried by every event (the receiver acknowledges to it).
        registry: serializers for anything that is not an AUN envelope.
        traced: the worker traces: each event carries the span it was sent from as its
            `traceparent` attribute (see `aun_runtime.base._trace_context`).
    """

    def __init__(self, origin: str, registry: Serializers, *, traced: bool = False) -> None:
        self._origin = origin
        self._registry = registry
        self._traced = traced  # a worker that traces: each event names the span it was sent from
        self._templates: dict[tuple[str, ...], cloudevent_pb2.CloudEvent] = {}

    def build(
        self, message: Any, topic_id: TopicId, sender: AgentId | None, message_id: str, *, created: str | None = None
    ) -> cloudevent_pb2.CloudEvent:
        """The event carrying `message`. Traced, it names the span it is sent from as its
        `traceparent` and the publish's `create` span (`created`, a `traceparent`) as
        `auncreated`, for the receiver's `process` span to be its child and to link to create."""
        if isinstance(message, AUNMessage):  # the common case: the envelope knows its JSON
            type_name, data = AUNMessage.wire_name, message.to_json().encode()
        else:
            # Contract classes travel under their namespaced wire name, not autogen's bare __name__.
            wire_name = getattr(type(message), "wire_name", None)
            type_name = wire_name if isinstance(wire_name, str) else self._registry.type_name(message)
            data = self._registry.serialize(message, type_name=type_name, data_content_type=JSON_DATA_CONTENT_TYPE)
        sender_id = sender or _UNKNOWN_SENDER
        key = (topic_id.type, topic_id.source, sender_id.type, sender_id.key, type_name)
        template = self._templates.get(key)
        if template is None:
            if len(self._templates) >= TEMPLATE_CACHE:
                self._templates.clear()
            template = self._templates[key] = cloudevent_pb2.CloudEvent(
                spec_version="1.0",
                type=topic_id.type,
                source=topic_id.source,
                attributes={
                    "datacontenttype": _Attr(ce_string=JSON_DATA_CONTENT_TYPE),
                    "dataschema": _Attr(ce_string=type_name),
                    "agagentsendertype": _Attr(ce_string=sender_id.type),
                    "agagentsenderkey": _Attr(ce_string=sender_id.key),
                    "agmsgkind": _Attr(ce_string="publish"),
                    ORIGIN_ATTR: _Attr(ce_string=self._origin),
                },
            )
        event = cloudevent_pb2.CloudEvent()
        event.CopyFrom(template)
        event.id = message_id
        event.binary_data = data
        if self._traced and (traceparent := current_traceparent()) is not None:
            event.attributes[TRACEPARENT_KEY].ce_string = traceparent
            if created is not None:
                event.attributes[CREATED_ATTR].ce_string = created
        return event
