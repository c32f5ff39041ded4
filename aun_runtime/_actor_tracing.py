"""OpenTelemetry spans for the actor runtime, named exactly as autogen-core names them.

Tracing costs a span per step and a JSON serialisation per delivery, which is most of what
autogen-core's runtime spends on a message. So the actor runtime traces only when tracing is on:
a tracer provider is passed, or an OpenTelemetry SDK provider is installed globally (as autogen-core,
it follows the global provider). `AUTOGEN_DISABLE_RUNTIME_TRACING=true` turns it off as it does
for autogen-core. When on, the spans are made by autogen-core's own `TraceHelper` with its
messaging configuration: `autogen create <topic>`, `autogen publish <topic>` and
`autogen process <agent>`, with the same attributes, so existing dashboards keep working.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from autogen_core import JSON_DATA_CONTENT_TYPE, AgentId, MessageContext
from autogen_core._serialization import SerializationRegistry
from autogen_core._telemetry import MessageRuntimeTracingConfig, TraceHelper
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, TracerProvider, get_tracer_provider

__all__ = ["RuntimeTracer", "tracing_provider"]


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


def serialize_for_trace(serializers: SerializationRegistry, message: Any) -> str:
    """The message as autogen-core shows it in spans: JSON through the registered serializer."""
    try:
        type_name = serializers.type_name(message)
        return serializers.serialize(
            message, type_name=type_name, data_content_type=JSON_DATA_CONTENT_TYPE
        ).decode("utf-8")
    except ValueError:
        return "Message could not be serialized"
