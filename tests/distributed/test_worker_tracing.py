"""A traced worker's spans: none unless a tracer provider is given; then autogen-core's tree across
workers (create, publish a root linked to it, process a child of publish linked to create), with
``aun deliver`` inside process."""

from __future__ import annotations

import asyncio
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, event
from aun_runtime.distributed import AUNHost, WorkerRuntime
from aun_runtime.testing import Recorder, Silent


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def _parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_spans_are_made_only_when_a_tracer_provider_is_given_and_form_autogen_cores_tree() -> None:
    host = AUNHost("127.0.0.1:0")
    await host.open()
    provider, exporter = _provider()
    try:
        for tracer_provider in (None, provider):
            runtime = AUNRuntime(core=WorkerRuntime(host.address, tracer_provider=tracer_provider))
            await runtime.register_agent("rec.local", Recorder)
            await runtime.register_agent("quiet.local", Silent)
            await runtime.start()
            await runtime.send("rec.local", "traced?", sender="quiet.local")
            await asyncio.wait_for(runtime.settle(), 10)
            await runtime.close()
            if tracer_provider is None:
                assert exporter.get_finished_spans() == ()
    finally:
        await host.stop()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert sorted(spans) == [
        "aun deliver rec.local",
        "autogen create aun.inbox.rec.local.(default)-T",
        "autogen process rec.local.(default)-A",
        "autogen publish aun.inbox.rec.local.(default)-T",
    ]
    create = spans["autogen create aun.inbox.rec.local.(default)-T"]
    publish = spans["autogen publish aun.inbox.rec.local.(default)-T"]
    process = spans["autogen process rec.local.(default)-A"]
    deliver = spans["aun deliver rec.local"]
    # publish: a root of its own, linked to create
    assert publish.parent is None
    assert [link.context.span_id for link in publish.links] == [_span_id(create)]
    # process: a child of publish, across the host, linked to create
    assert _parent_id(process) == _span_id(publish)
    assert [link.context.span_id for link in process.links] == [_span_id(create)]
    assert (process.attributes or {})["recipient_agent_type"] == "rec.local"
    # the AUN span inside it
    assert _parent_id(deliver) == _span_id(process)


class Forwarder(AUNAgent):
    """Passes every text on to rec.local, held by another worker."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        await self.send("rec.local", f"passed on: {message.text}")


async def test_a_delivery_on_another_worker_continues_the_publish_it_came_from(tmp_path: Path) -> None:
    host = AUNHost("127.0.0.1:0")
    await host.open()
    provider, exporter = _provider()
    first = AUNRuntime(core=WorkerRuntime(host.address, tracer_provider=provider, archive=tmp_path / "first.sqlite"))
    second = AUNRuntime(core=WorkerRuntime(host.address, tracer_provider=provider, archive=tmp_path / "second.sqlite"))
    try:
        await first.register_agent("fwd.local", Forwarder)
        await first.register_agent("quiet.local", Silent)
        await second.register_agent("rec.local", Recorder)
        await first.start()
        await second.start()
        await first.send("fwd.local", "hello", sender="quiet.local")
        recorder = await second.agent_instance("rec.local", Recorder)
        for _ in range(500):
            if recorder.received:
                break
            await asyncio.sleep(0.02)
        assert [m.text for m in recorder.received] == ["passed on: hello"]
    finally:
        await first.close()
        await second.close()
        await host.stop()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    sent_from = spans["aun deliver fwd.local"]
    create = spans["autogen create aun.inbox.rec.local.(default)-T"]
    publish = spans["autogen publish aun.inbox.rec.local.(default)-T"]
    process = spans["autogen process rec.local.(default)-A"]
    delivered = spans["aun deliver rec.local"]
    # The send of fwd.local's handler: its create span is a child of the span it was sent from...
    assert _parent_id(create) == _span_id(sent_from)
    # ...and the other worker's handling is a child of its publish span, linked to that create span.
    assert process.parent is not None and process.parent.is_remote
    assert _parent_id(process) == _span_id(publish)
    assert process.context is not None and publish.context is not None
    assert process.context.trace_id == publish.context.trace_id
    assert [link.context.span_id for link in process.links] == [_span_id(create)]
    assert _parent_id(delivered) == _span_id(process)
