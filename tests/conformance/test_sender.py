"""AUN checklist, sender side: never block on a reply, take 0/1/N replies, never read silence as failure,
ask for collaboration with plain payloads."""

from __future__ import annotations

import asyncio
import logging

import pytest

from aun_runtime import AUNContract, JsonPayload, RecordKind
from aun_runtime.testing import Gate, Replier, Silent

from .conftest import RuntimeFactory


async def test_send_returns_before_the_receiver_has_even_handled_it(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("busy.local", Gate)
    inbox = await runtime.open_inbox()
    await runtime.start()
    gate = await runtime.agent_instance("busy.local", Gate)

    await asyncio.wait_for(inbox.send("busy.local", "are you there?"), timeout=1)

    await asyncio.wait_for(gate.started.wait(), timeout=1)
    assert gate.received == []  # the handler is still running; the sender is long gone
    gate.opened.set()
    await runtime.settle()
    assert [m.text for m in gate.received] == ["are you there?"]


@pytest.mark.parametrize("times", [0, 1, 3])
async def test_sender_takes_zero_one_or_many_replies(
    make_runtime: RuntimeFactory, times: int, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("answerer.local", lambda: Replier(times=times))
    inbox = await runtime.open_inbox()
    await runtime.start()

    with caplog.at_level(logging.WARNING, logger="aun_runtime"):
        question = await inbox.send("answerer.local", "how many?")
        await runtime.settle()

    replies = inbox.replies_to(question)
    assert [r.text for r in replies] == [f"answer {n} of {times} to: how many?" for n in range(1, times + 1)]
    assert all(r.thread == question.message_id for r in replies)
    assert runtime.stats.dead_letters == 0
    # Zero replies is not worth a warning. Only the runtime's own records count: grpc's poller thread
    # may log about the closed event loop of an earlier test in the same process.
    assert [r for r in caplog.records if r.name.startswith("aun_runtime")] == []


async def test_silence_is_never_read_as_failure(
    make_runtime: RuntimeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("quiet.local", Silent)
    inbox = await runtime.open_inbox()
    await runtime.start()

    with caplog.at_level(logging.DEBUG, logger="aun_runtime"):
        for n in range(5):
            await inbox.send("quiet.local", f"message {n}")
        await runtime.settle()
        assert await inbox.next(timeout=0.05) is None  # nothing came back, and nothing raised

    assert await runtime.ping("quiet.local") is True  # liveness is asked, not guessed
    assert runtime.archive.count(kind=RecordKind.DEAD_LETTER) == 0
    # The runtime's own records only, as above: grpc's poller may log about an earlier test's loop.
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("aun_runtime")]
    assert runtime.archive.count(owner="quiet.local", kind=RecordKind.RECEIVED) == 5


class HelpWanted(AUNContract, wire_name="tests.conformance.HelpWanted"):
    topic: str


async def test_collaboration_requests_travel_as_plain_json_not_tool_call(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("helper.local", Silent)
    await runtime.open_inbox()
    await runtime.start()

    sent = await runtime.send("helper.local", HelpWanted(topic="flaky test"))
    await runtime.settle()

    assert isinstance(sent.payload, JsonPayload)
    assert sent.payload.kind == "tests.conformance.HelpWanted"
    assert sent.payload.data == {"topic": "flaky test"}
    [received] = runtime.archive.history("helper.local", kinds=[RecordKind.RECEIVED])
    assert received.message is not None and received.message.payload.type == "json"
