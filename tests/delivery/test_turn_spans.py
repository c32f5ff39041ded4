"""Turn spans in one process: every turn of a thread is in one trace, each a child of the turn
that sent its message, with the AUN ids; tracing off, a runtime makes none."""

from __future__ import annotations

import itertools

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, event
from aun_runtime.delivery._turn_spans import TurnSpans


class Ping(AUNAgent):
    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        if message.hops < 3:
            await self.send("pong.local" if self.aid == "ping.local" else "ping.local", f"{message.text}!")


async def test_a_thread_is_one_trace_of_turns_each_a_child_of_the_sending_turn() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runtime = AUNRuntime()
    assert runtime.turns.spans is None  # no SDK provider installed globally: tracing is off
    runtime.turns.spans = TurnSpans(provider.get_tracer("test"))
    async with runtime:
        await runtime.register_agent("ping.local", Ping)
        await runtime.register_agent("pong.local", Ping)
        first = await runtime.send("ping.local", "hi")
        await runtime.settle()
    turns = sorted(
        (s for s in exporter.get_finished_spans() if s.name.startswith("aun turn ") and s.attributes
         and "aun.message_id" in s.attributes),
        key=lambda s: s.start_time or 0,
    )
    assert [s.name for s in turns] == ["aun turn ping.local", "aun turn pong.local"] * 2
    assert {s.context.trace_id for s in turns} == {turns[0].context.trace_id}
    for parent, child in itertools.pairwise(turns):
        assert child.parent is not None and child.parent.span_id == parent.context.span_id
    assert all(s.attributes is not None and s.attributes["aun.thread_id"] == first.message_id for s in turns)
    assert turns[1].attributes is not None and turns[1].attributes["aun.from_aid"] == "ping.local"
    assert all(s.attributes is not None and "aun.group_id" not in s.attributes for s in turns)


async def test_a_group_message_names_its_group() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runtime = AUNRuntime()
    runtime.turns.spans = TurnSpans(provider.get_tracer("test"))
    async with runtime:
        await runtime.register_agent("ping.local", Ping)
        await runtime.create_group("room", ["ping.local", "app.local"])
        await runtime.group_send("room", "hello all")
        await runtime.settle()
    [turn] = [s for s in exporter.get_finished_spans() if s.name == "aun turn ping.local" and s.attributes
              and s.attributes.get("aun.group_id") == "room"]
    assert turn.attributes is not None and turn.attributes["aun.from_aid"] == "app.local"
