"""autogen-core's runtime API on every core, with no AUN runtime above: what tools built on
autogen-core read (its spans, its log lines) reads the same on ours."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import pytest
from autogen_core import (
    AgentId,
    DefaultInterventionHandler,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
    event,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aun_runtime import AUNCore

from .conftest import CoreFactory, start

#: Seconds a run may take here before it counts as hanging.
RUN_LIMIT = 20.0


@dataclass
class Note:
    n: int


class Sink(RoutedAgent):
    def __init__(self) -> None:
        super().__init__("keeps notes")
        self.notes: list[int] = []

    @event
    async def on_note(self, message: Note, ctx: MessageContext) -> None:
        self.notes.append(message.n)


class Observer(DefaultInterventionHandler):
    async def on_publish(self, message: Any, *, message_context: MessageContext) -> Any:
        return message


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


async def _publish_one(core: AUNCore, *agent_types: str) -> None:
    for agent_type in agent_types:
        await Sink.register(core, agent_type, Sink)
        await core.add_subscription(TypeSubscription("notes", agent_type))
    await start(core)
    await core.publish_message(Note(1), TopicId("notes", "default"))
    await asyncio.wait_for(core.stop_when_idle(), RUN_LIMIT)


async def test_a_publish_and_its_processing_are_traced_in_autogen_cores_tree(make_core: CoreFactory) -> None:
    provider, exporter = _provider()
    core = await make_core(tracer_provider=provider)
    await _publish_one(core, "sink")

    spans = {s.name: s for s in exporter.get_finished_spans()}
    create = spans["autogen create notes.(default)-T"]
    publish = spans["autogen publish notes.(default)-T"]
    process = spans["autogen process sink.(default)-A"]
    # create: where the publisher is (here: nowhere); publish: a root of its own, linked to create
    assert create.parent is None
    assert publish.parent is None
    assert [link.context.span_id for link in publish.links] == [_id(create)]
    # process: a child of publish, linked to create, with autogen-core's attributes
    assert process.parent is not None and process.parent.span_id == _id(publish)
    assert [link.context.span_id for link in process.links] == [_id(create)]
    assert (process.attributes or {})["recipient_agent_type"] == "sink"
    assert (process.attributes or {})["message"] == '{"n": 1}'
    # Anything else is the runtime's own, inside that tree (a worker's aun deliver, in process).
    for other in set(spans) - {create.name, publish.name, process.name}:
        assert spans[other].parent is not None and spans[other].parent.span_id == _id(process), other
    if core.directory is None:  # in one process, publish lasts until its recipients are done, as there
        assert create.end_time is not None and process.end_time is not None and publish.end_time is not None
        assert create.end_time <= process.end_time <= publish.end_time
        assert len(spans) == 3


async def test_each_intervention_handler_has_its_span_linked_to_the_publish_it_intercepts(
    make_core: CoreFactory,
) -> None:
    provider, exporter = _provider()
    core = await make_core(tracer_provider=provider, intervention_handlers=[Observer()])
    await _publish_one(core, "sink")

    spans = {s.name: s for s in exporter.get_finished_spans()}
    create, intercept = spans["autogen create notes.(default)-T"], spans["autogen intercept Observer"]
    assert intercept.parent is None
    assert [link.context.span_id for link in intercept.links] == [_id(create)]
    assert str(intercept.kind) == "SpanKind.CONSUMER"


async def test_an_agent_that_cannot_be_made_is_logged_in_autogen_cores_words_and_costs_the_others_nothing(
    make_core: CoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    core = await make_core()

    def broken() -> Sink:
        raise ValueError("no luck")

    await Sink.register(core, "sink", Sink)
    await Sink.register(core, "broken", broken)
    for agent_type in ("broken", "sink"):
        await core.add_subscription(TypeSubscription("notes", agent_type))
    await start(core)
    with caplog.at_level(logging.ERROR):
        await core.publish_message(Note(7), TopicId("notes", "default"))
        await asyncio.wait_for(core.idle(), RUN_LIMIT)

    sink = await core.try_get_underlying_agent_instance(AgentId("sink", "default"), Sink)
    assert sink.notes == [7]
    assert any(
        r.getMessage().startswith("Error constructing agent broken") and r.exc_info is not None for r in caplog.records
    )
    await core.stop()

