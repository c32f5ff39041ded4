"""Model and tool calls as OpenTelemetry spans, named as the GenAI semantic conventions name them.

A model call is a `chat <model>` span (kind CLIENT) with `gen_ai.operation.name` = `chat`,
`gen_ai.request.model`, and once it answers `gen_ai.usage.input_tokens` and
`gen_ai.usage.output_tokens`; a call that fails has `error.type` (the exception's class) and an
error status. A local tool call is an `execute_tool <name>` span (kind INTERNAL) with
`gen_ai.operation.name` = `execute_tool` and `gen_ai.tool.name`. Both are children of the span
current when they are made: the turn that made them (see the docs' page Operating). With no
tracer provider installed the spans are OpenTelemetry's no-op ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from autogen_core.models import RequestUsage
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

__all__ = ["end_model_span", "start_model_span", "tool_span"]

_TRACER_NAME = "aun_runtime.models"


def start_model_span(model: str) -> Span:
    """The span of one call of `model`, started now (end it with `end_model_span`)."""
    return trace.get_tracer(_TRACER_NAME).start_span(
        f"chat {model}", kind=SpanKind.CLIENT,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": model},
    )


def end_model_span(span: Span, usage: RequestUsage | None, error: BaseException | None) -> None:
    """End a model call's span with what it used, or how it failed."""
    if usage is not None:
        span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
    if error is not None and not isinstance(error, GeneratorExit):
        span.set_attribute("error.type", type(error).__name__)
        span.set_status(Status(StatusCode.ERROR, str(error)[:200]))
    span.end()


@contextlib.contextmanager
def tool_span(name: str) -> Iterator[Span]:
    """The span of one local tool call, current while the block runs."""
    with trace.get_tracer(_TRACER_NAME).start_as_current_span(
        f"execute_tool {name}", kind=SpanKind.INTERNAL,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name},
        record_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__name__)
            raise
