"""Trace context across the AUN network: a message an agent sends from a traced runtime is published
in a traced runtime inside the sender's trace, a child of the span it was sent from; an untraced
runtime puts nothing on the wire, and an old outbox file opens."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aun_runtime import AUNActorRuntime, AUNAgent, AUNMessage, AUNRuntime, MessageContext, event
from aun_runtime.base._trace_context import traceparent_of
from aun_runtime.gateway import GatewayServer
from aun_runtime.network import GatewayAgent
from aun_runtime.network._outbox import Outbox

from .conftest import PlainClient, agent_config, eventually, info_of

ANSWERED: list[str] = []


class Asker(AUNAgent):
    """Passes what it is told on to the AID named in it, over the network."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        to, _, text = (message.text or "").partition(" ")
        await self.send(to, text)


class Answerer(AUNAgent):
    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        ANSWERED.append(message.text or "")


async def _runtime(tmp_path: Path, gateway: GatewayServer, name: str, cls: type[AUNAgent], agent: str,
                   provider: TracerProvider | None) -> tuple[AUNRuntime, GatewayAgent]:
    core = AUNActorRuntime(tracer_provider=provider) if provider is not None else None
    runtime = AUNRuntime(core=core, archive=tmp_path / f"{name}.sqlite", domain=gateway.issuer)
    await runtime.start()
    await runtime.register_agent(f"{agent}.{gateway.issuer}", cls)
    bridge = GatewayAgent(runtime, agent_config(info_of(gateway), tmp_path / name))
    await bridge.start()
    await asyncio.wait_for(bridge.wait_connected(), 60)
    return runtime, bridge


def _process_span(spans: tuple[ReadableSpan, ...], agent: str) -> ReadableSpan:  # one per agent here
    [span] = [s for s in spans if s.name.startswith("autogen process") and agent in s.name]
    return span


async def test_the_receivers_spans_continue_the_senders_trace(tmp_path: Path, gateway: GatewayServer) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ANSWERED.clear()
    first, first_bridge = await _runtime(tmp_path, gateway, "first", Asker, "asker", provider)
    second, second_bridge = await _runtime(tmp_path, gateway, "second", Answerer, "answerer", provider)
    try:
        inbox = await first.open_inbox(f"boss.{gateway.issuer}")
        await inbox.send(f"asker.{gateway.issuer}", f"answerer.{gateway.issuer} traced")
        await eventually(lambda: ANSWERED == ["traced"], what="the answer")
        await eventually(lambda: any(s.name.startswith("autogen process") and "answerer" in s.name
                                     for s in exporter.get_finished_spans()), what="the receiver's span")
    finally:
        for bridge, runtime in ((first_bridge, first), (second_bridge, second)):
            await bridge.stop()
            await runtime.close()
    spans = exporter.get_finished_spans()
    asked, answered = _process_span(spans, "asker"), _process_span(spans, "answerer")
    [created] = [s for s in spans if s.name.startswith("autogen create") and "answerer" in s.name]
    assert asked.context is not None and created.context is not None and created.parent is not None
    # The receiver's publish starts inside the sender's trace, a child of the span it was sent from...
    assert (created.context.trace_id, created.parent.span_id) == (asked.context.trace_id, asked.context.span_id)
    assert created.parent.is_remote
    # ...and its handling links to that publish, as autogen-core's process spans link to their create.
    assert [link.context.span_id for link in answered.links] == [created.context.span_id]


async def test_an_untraced_runtime_puts_no_trace_on_the_wire_and_a_bad_one_is_ignored(
    tmp_path: Path, gateway: GatewayServer, plain_clients: Any
) -> None:
    first, bridge = await _runtime(tmp_path, gateway, "plain", Asker, "asker", None)
    user: PlainClient = await plain_clients(info_of(gateway), "user")
    try:
        await user.send(f"asker.{gateway.issuer}", {"type": "text", "text": f"{user.aid} untraced"})
        got = await user.next(timeout=30)
        assert got["payload"]["text"] == "untraced"
        assert "traceparent" not in got["payload"]["client_context"]["aun_envelope"]
    finally:
        await bridge.stop()
        await first.close()
    assert traceparent_of({"payload": {"client_context": {"aun_envelope": {"traceparent": "00-zz-yy-01"}}}}) is None
    good = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    assert traceparent_of({"payload": {"client_context": {"aun_envelope": {"traceparent": good}}}}) == good


async def test_an_outbox_made_before_traces_opens_and_keeps_its_messages(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "outbox.sqlite"
    message = AUNMessage(from_aid="a.aun.localhost", to="b.aun.localhost", payload={"type": "text", "text": "kept"})
    with sqlite3.connect(path) as old:  # the schema as it was: no trace column
        old.execute("CREATE TABLE outbox (id INTEGER PRIMARY KEY, sender TEXT NOT NULL, recipient TEXT, "
                    "body TEXT NOT NULL, enqueued_at INTEGER NOT NULL)")
        old.execute("INSERT INTO outbox VALUES (1, ?, ?, ?, 0)", (message.from_aid, message.to, message.to_json()))
    outbox = Outbox(path)
    try:
        [item] = outbox.take_waiting()
        assert (item.message.text, item.trace) == ("kept", None)
        traced = await outbox.put(message.from_aid, message.to, message, "00-" + "c" * 32 + "-" + "d" * 16 + "-01")
    finally:
        await outbox.close()
    reopened = Outbox(path)
    try:
        assert [i.trace for i in reopened.take_waiting()] == [None, traced.trace]
    finally:
        await reopened.close()
    assert json.loads(message.to_json())["payload"]["text"] == "kept"
