"""OpenTelemetry spans for the actor runtime, named and arranged exactly as autogen-core's.

Tracing costs a span per step and a JSON serialisation per delivery, which is most of what
autogen-core's runtime spends on a message. So the actor runtime traces only when tracing is on:
a tracer provider is passed, or an OpenTelemetry SDK provider is installed globally (as autogen-core,
it follows the global provider). `AUTOGEN_DISABLE_RUNTIME_TRACING=true` turns it off as it does
for autogen-core. When on, the spans are made by autogen-core's own `TraceHelper` with its
messaging configuration, with the same names, kinds and attributes, in the same tree:

* `autogen create <topic>`: the publish call, a child of whatever span the publisher is in;
* `autogen intercept <handler class>`, one per intervention handler: a root, linked to `create`;
* `autogen publish <topic>`: a root, linked to `create`, that lasts until every recipient has
  handled the message (or it was reported undeliverable), as autogen-core's lasts until its
  handlers return;
* `autogen process <agent>`, one per recipient: a child of `publish`, linked to `create`.

So a trace viewer shows a publish and its processing here as it shows them on autogen-core.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from autogen_core import JSON_DATA_CONTENT_TYPE, AgentId, MessageContext
from opentelemetry.trace import (
    NoOpTracerProvider,
    ProxyTracerProvider,
    Span,
    TracerProvider,
    get_tracer_provider,
    set_span_in_context,
)

from ..base._autogen_internals import (
    EnvelopeMetadata,
    MessageRuntimeTracingConfig,
    SerializationRegistry,
    TraceHelper,
)

__all__ = ["PublishTrace", "RuntimeTracer", "tracing_provider"]


def tracing_provider(tracer_provider: TracerProvider | None) -> TracerProvider | None:
    """The provider to trace with, or None when tracing is off."""
    if os.environ.get("AUTOGEN_DISABLE_RUNTIME_TRACING") == "true":
        return None
    if tracer_provider is not None:
        return tracer_provider
    installed = get_tracer_provider()
    if isinstance(installed, ProxyTracerProvider | NoOpTracerProvider):
        return None  # nothing installed: every span would be a no-op that still costs
    return installed


class RuntimeTracer:
    """autogen-core's trace helper, plus the span attributes its runtime attaches to `process`."""

    def __init__(self, provider: TracerProvider, runtime_name: str) -> None:
        self.helper: TraceHelper[Any, Any, Any] = TraceHelper(
            provider, MessageRuntimeTracingConfig(runtime_name)
        )

    @staticmethod
    def process_attributes(
        serializers: SerializationRegistry,
        sender: AgentId | None,
        sender_class: str | None,
        recipient: AgentId,
        recipient_class: str,
        ctx: MessageContext,
        message: Any,
    ) -> Mapping[str, str]:
        attributes: dict[str, str] = {}
        if sender is not None:
            attributes["sender_agent_type"] = sender.type
            if sender_class is not None:
                attributes["sender_agent_class"] = sender_class
        attributes["recipient_agent_type"] = recipient.type
        attributes["recipient_agent_class"] = recipient_class
        attributes["message_context"] = json.dumps(
            {
                "sender": str(ctx.sender),
                "topic_id": str(ctx.topic_id),
                "is_rpc": ctx.is_rpc,
                "message_id": ctx.message_id,
            }
        )
        attributes["message"] = serialize_for_trace(serializers, message)
        return attributes


class PublishTrace:
    """The spans of one traced publish: its `create` span, as envelope metadata (what `process`
    spans link to), and its `publish` span, ended when the last delivery it is waiting for ends.

    The publisher holds it while it routes; each delivery queued holds it once more, and lets go
    once handled or reported undeliverable.
    """

    __slots__ = ("context", "created", "holds", "span")

    def __init__(self, created: EnvelopeMetadata, span: Span) -> None:
        self.created = created
        self.span = span
        #: The context whose current span is ``publish``: the parent of every ``process`` span.
        self.context = set_span_in_context(span)
        self.holds = 1  # the publisher's, while it routes

    def hold(self, count: int = 1) -> None:
        self.holds += count

    def release(self) -> None:
        self.holds -= 1
        if not self.holds:
            self.span.end()


def serialize_for_trace(serializers: SerializationRegistry, message: Any) -> str:
    """The message as autogen-core shows it in spans: JSON through the registered serializer."""
    try:
        type_name = serializers.type_name(message)
        return serializers.serialize(
            message, type_name=type_name, data_content_type=JSON_DATA_CONTENT_TYPE
        ).decode("utf-8")
    except ValueError:
        return "Message could not be serialized"
