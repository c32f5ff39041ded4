"""Trace context across processes: a receiving runtime's spans continue the sender's trace.

Over the AUN network (the gateway agent):

When the sending runtime traces (its core was given a tracer provider, or one is installed: see
`aun_runtime.core._actor_tracing`), the span a message is sent from (the sending agent's
`autogen process` span) is written into the message's envelope as a W3C `traceparent`
(`payload.client_context.aun_envelope.traceparent`), kept in the outbox with the message so that
a message sent after a restart still names it. A receiving runtime that traces publishes such a
message inside that context: its `autogen create` span is a child of the sender's span, in the
sender's trace; from there on the spans are autogen-core's, in its tree (see
`aun_runtime.core._actor_tracing`): `publish` a root linked to that create span, `process` its
child, linked to create. A runtime that does not trace writes nothing, and reads no more than
whether the field is there; any other AUN client sees one more field in a place it does not look.

Between workers of one gRPC host, the `traceparent` of the sending worker's `autogen publish`
span rides as the CloudEvent's `traceparent` attribute (the CloudEvents distributed-tracing
extension), and that of its create span as `auncreated`: the receiving worker's `autogen
process` span is a child of that publish span and links to create, as in one process, and its
`aun deliver` span (the delivery, journaled) is a child of process.

Only the W3C `traceparent` travels (no `tracestate`, no baggage): what ties the spans together,
nothing an application put there.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = ["TRACEPARENT_KEY", "context_of", "continued", "current_traceparent", "traceparent_of", "well_formed"]

#: The envelope field that carries it.
TRACEPARENT_KEY = "traceparent"
_PROPAGATOR = TraceContextTextMapPropagator()
# version 00: 2 + 1 + 32 + 1 + 16 + 1 + 2 characters, lowercase hex (W3C Trace Context).
_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def current_traceparent() -> str | None:
    """The `traceparent` of the span the caller runs in, or None when there is none (tracing
    off: then this is one context lookup)."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get(TRACEPARENT_KEY)


def well_formed(value: Any) -> str | None:
    """`value` if it is a W3C `traceparent` (version 00), else None: what came from elsewhere."""
    return value if isinstance(value, str) and _TRACEPARENT.fullmatch(value) else None


def traceparent_of(event: dict[str, Any]) -> str | None:
    """The `traceparent` a message event's envelope carries, if it is well formed."""
    payload = event.get("payload")
    context = payload.get("client_context") if isinstance(payload, dict) else None
    envelope = context.get("aun_envelope") if isinstance(context, dict) else None
    return well_formed(envelope.get(TRACEPARENT_KEY) if isinstance(envelope, dict) else None)


def context_of(traceparent: str) -> otel_context.Context:
    """The context whose (remote) current span is the one `traceparent` names."""
    return _PROPAGATOR.extract({TRACEPARENT_KEY: traceparent})


@contextlib.contextmanager
def continued(traceparent: str | None) -> Iterator[None]:
    """Run the block in the trace `traceparent` names (as its remote parent); None changes nothing."""
    if traceparent is None:
        yield
        return
    token = otel_context.attach(context_of(traceparent))
    try:
        yield
    finally:
        otel_context.detach(token)
