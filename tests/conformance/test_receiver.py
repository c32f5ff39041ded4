"""AUN checklist, receiver side: autonomous by default (replies only through the send tool, thinking
stays inside), never drops a message, makes no response promise, declares its mode."""

from __future__ import annotations

import pytest
from autogen_core import AgentId, TopicId

from aun_runtime import (
    AUNAgent,
    AUNMessage,
    MessageContext,
    RecordKind,
    RPCForbiddenError,
    ToolCallPayload,
    UnknownPayload,
    event,
)
from aun_runtime.testing import Recorder, Silent

from .conftest import RuntimeFactory


async def test_thoughts_are_archived_and_never_sent(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("thinker.local", Silent)
    inbox = await runtime.open_inbox()
    await runtime.start()

    await inbox.send("thinker.local", "what do you make of this?")
    await runtime.settle()

    [thought] = runtime.archive.history("thinker.local", kinds=[RecordKind.THOUGHT])
    assert "nothing to add" in (thought.text or "")
    assert inbox.received == []
    assert runtime.archive.count(kind=RecordKind.SENT) == 1  # only the question itself


class ToolOwner(AUNAgent):
    """Has a local tool named like the one in an incoming tool_call; it must not run on receipt."""

    def __init__(self) -> None:
        super().__init__("owns a tool")
        self.tool_runs = 0
        self.annotations: list[str] = []

    def delete_everything(self) -> None:
        self.tool_runs += 1

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        if isinstance(message.payload, ToolCallPayload):
            self.annotations.append(message.payload.name)


async def test_receiving_a_tool_call_runs_nothing(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("owner.local", ToolOwner)
    inbox = await runtime.open_inbox()
    await runtime.start()

    await inbox.send("owner.local", ToolCallPayload(call_id="c1", name="delete_everything", arguments={}))
    await runtime.settle()

    owner = await runtime.agent_instance("owner.local", ToolOwner)
    assert owner.annotations == ["delete_everything"]  # seen as an annotation of the sender's tool use
    assert owner.tool_runs == 0
    assert inbox.received == []  # and no tool_result owed


class OnlyText(AUNAgent):
    """Has no handler at all: every message is 'unhandled' and must still be kept."""


async def test_a_message_nobody_handles_is_archived_not_dropped(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("plain.local", OnlyText)
    inbox = await runtime.open_inbox()
    await runtime.start()

    exotic = {"type": "location", "lat": 48.85, "lon": 2.35, "label": "somewhere"}
    sent = await inbox.send("plain.local", exotic)
    await runtime.settle()

    [record] = runtime.archive.history("plain.local")
    assert record.kind is RecordKind.RECEIVED
    assert record.message is not None
    assert isinstance(record.message.payload, UnknownPayload)
    assert record.message.payload.model_dump() == exotic  # kept whole
    assert record.message == sent


async def test_no_response_promise_send_message_is_refused_before_anything_is_queued(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("rec.local", Recorder)
    await runtime.start()

    with pytest.raises(RPCForbiddenError):
        await runtime.send_message("hi", AgentId("rec.local", "default"))
    with pytest.raises(RPCForbiddenError):
        await runtime.core.send_message("hi", AgentId("rec.local", "default"))
    recorder = await runtime.agent_instance("rec.local", Recorder)
    with pytest.raises(RPCForbiddenError):
        await recorder.send_message("hi", AgentId("rec.local", "default"))

    await runtime.stop_when_idle()  # would hang if a refused RPC had been half-queued
    assert recorder.received == []


async def test_agents_declare_the_autonomous_mode(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("rec.local", Recorder, description="keeps things")
    await runtime.start()

    assert runtime.agent_info("rec.local") == {
        "aid": "rec.local",
        "mode": "autonomous",
        "description": "keeps things",
    }
    recorder = await runtime.agent_instance("rec.local", Recorder)
    assert recorder.aun_metadata["mode"] == "autonomous"


async def test_raw_publishes_on_the_inbox_topic_also_go_through_mailbox_and_channel(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("rec.local", Recorder)
    await runtime.start()
    message = AUNMessage(from_aid="outsider.local", to="rec.local", payload={"type": "text", "text": "raw"})

    await runtime.core.publish_message(message, TopicId("aun.inbox.rec.local", "default"))
    await runtime.core.publish_message(message, TopicId("aun.inbox.rec.local", "default"))
    await runtime.settle()

    recorder = await runtime.agent_instance("rec.local", Recorder)
    assert [m.text for m in recorder.received] == ["raw"]  # the second is a duplicate
    assert runtime.stats.duplicates == 1
