"""A span for every turn, in the trace of the AUN thread it belongs to.

autogen-core's own spans (see `aun_runtime.core._actor_tracing`) start a new trace at each publish, so a
conversation of seven messages shows as several traces linked together. When tracing is on (an
OpenTelemetry SDK tracer provider is installed globally, as every command does from the `OTEL_*`
environment), each turn also gets an `aun turn <aid>` span whose parent is the span the message
was sent from: the sender's own turn, in this process or, through the worker's CloudEvent, in
another. So every turn of a thread, on every worker, is in the one trace its first message began;
the turn's autogen-core span is linked. Each carries `aun.aid`, `aun.thread_id`,
`aun.message_id`, `aun.from_aid` and `aun.group_id`, and the model and tool calls made in the
turn are its children.

Tracing off, none of this runs: the turn watch and the send path find no `TurnSpans` and go on.
"""

from __future__ import annotations

from contextvars import Token
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, set_span_in_context

from ..base._trace_context import context_of

if TYPE_CHECKING:
    from protocols.aun import AUNMessage

__all__ = ["SENT_CONTEXTS", "TurnSpans", "note_sent_from", "turn_spans"]

#: How many sent messages' span contexts are kept for their recipients' turns (the oldest go first).
SENT_CONTEXTS = 10_000


class Turn(Protocol):
    """What a turn span needs of a turn (`aun_runtime.delivery._turns.Turn`)."""

    aid: str
    what: str
    message: AUNMessage | None
    cause: BaseException | None
    span: Span | None
    span_token: Token[otel_context.Context]


# The span each message was sent from, by message id, for its recipients' turns in this process;
# process-wide, as a worker's deliveries name it too (message ids are unique).
_sent: dict[str, SpanContext] = {}


def note_sent_from(message_id: str, traceparent: str) -> None:
    """`message_id` was sent, in another process, from the span `traceparent` names."""
    _note(message_id, trace.get_current_span(context_of(traceparent)).get_span_context())


def _note(message_id: str, context: SpanContext) -> None:
    if not context.is_valid:
        return
    if len(_sent) >= SENT_CONTEXTS:
        del _sent[next(iter(_sent))]
    _sent[message_id] = context


class TurnSpans:
    """Starts and ends the span of each turn; remembers the span each message was sent from."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer

    @staticmethod
    def sent(message_id: str) -> None:
        """`message_id` is being sent from the current span: its recipients' turns are children of it."""
        _note(message_id, trace.get_current_span().get_span_context())

    def begin(self, turn: Turn) -> None:
        """Start the turn's span and make it current in the turn's task."""
        message = turn.message
        attributes: dict[str, Any] = {"aun.aid": turn.aid}
        parent: otel_context.Context | None = None
        current = trace.get_current_span().get_span_context()
        if message is not None:
            attributes["aun.message_id"] = message.message_id
            attributes["aun.thread_id"] = message.thread or message.message_id
            attributes["aun.from_aid"] = message.from_aid
            if message.group_id is not None:
                attributes["aun.group_id"] = message.group_id
            sent_from = _sent.get(message.message_id)
            if sent_from is not None:
                parent = set_span_in_context(NonRecordingSpan(sent_from))
        elif turn.what:
            attributes["aun.turn"] = turn.what
        links = [Link(current)] if parent is not None and current.is_valid else None
        span = self.tracer.start_span(
            f"aun turn {turn.aid}", context=parent, kind=SpanKind.CONSUMER, attributes=attributes, links=links
        )
        turn.span = span
        turn.span_token = otel_context.attach(set_span_in_context(span))

    @staticmethod
    def end(turn: Turn) -> None:
        span = turn.span
        if span is None:
            return
        if turn.cause is not None:
            span.set_attribute("error.type", type(turn.cause).__name__)
        otel_context.detach(turn.span_token)
        span.end()
        turn.span = None


def turn_spans() -> TurnSpans | None:
    """A `TurnSpans` on the global tracer provider if an SDK provider is installed, else None."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return TurnSpans(provider.get_tracer("aun_runtime"))
