"""Tracing on AUNActorRuntime: off unless asked for; when on, autogen-core's span names and attributes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest
from autogen_core import (
    AgentRuntime,
    MessageContext,
    RoutedAgent,
    SingleThreadedAgentRuntime,
    TopicId,
    TypeSubscription,
    event,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aun_runtime import AUNActorRuntime
from aun_runtime.core._actor_tracing import tracing_provider


@dataclass
class Note:
    n: int


class Sink(RoutedAgent):
    def __init__(self) -> None:
        super().__init__("sink")

    @event
    async def on_note(self, message: Note, ctx: MessageContext) -> None:
        pass


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


async def _traced_run(runtime: AgentRuntime) -> None:
    for name in ("a", "b"):
        await runtime.register_factory(name, Sink)
        await runtime.add_subscription(TypeSubscription("notes", name))
    runtime.start()  # type: ignore[attr-defined]
    for n in range(3):
        await runtime.publish_message(Note(n), TopicId("notes", "default"))
    await runtime.stop_when_idle()  # type: ignore[attr-defined]


async def test_spans_carry_autogen_cores_names_kinds_and_attributes() -> None:
    provider, autogen_spans = _provider()
    await _traced_run(SingleThreadedAgentRuntime(tracer_provider=provider))
    provider, our_spans = _provider()
    await _traced_run(AUNActorRuntime(tracer_provider=provider))

    def shape(exporter: InMemorySpanExporter) -> Counter[tuple[str, str]]:
        return Counter((s.name, str(s.kind)) for s in exporter.get_finished_spans())

    assert shape(our_spans) == shape(autogen_spans)
    assert shape(our_spans)[("autogen process a.(default)-A", "SpanKind.CONSUMER")] == 3
    [process, *_] = [s for s in our_spans.get_finished_spans() if s.name.startswith("autogen process")]
    [theirs, *_] = [s for s in autogen_spans.get_finished_spans() if s.name.startswith("autogen process")]
    assert set(process.attributes or {}) == set(theirs.attributes or {})
    assert (process.attributes or {})["messaging.operation"] == "process"


def test_tracing_is_off_unless_a_provider_is_given_or_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    provider, _ = _provider()
    assert tracing_provider(None) is None  # no SDK provider installed globally in the tests
    assert tracing_provider(provider) is provider
    monkeypatch.setenv("AUTOGEN_DISABLE_RUNTIME_TRACING", "true")
    assert tracing_provider(provider) is None


async def test_without_tracing_no_span_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    import autogen_core._telemetry._tracing as tracing

    original = tracing.TraceHelper.trace_block

    def counting(self: object, operation: str, *args: object, **kwargs: object) -> object:
        made.append(operation)
        return original(self, operation, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tracing.TraceHelper, "trace_block", counting)
    await _traced_run(AUNActorRuntime())
    assert made == []
    await _traced_run(SingleThreadedAgentRuntime())
    assert "process" in made  # autogen-core's runtime makes them whether anyone listens or not
