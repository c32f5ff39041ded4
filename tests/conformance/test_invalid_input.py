"""Bad input gets a specific error that says what to do; nothing half-happens."""

from __future__ import annotations

import pytest

from aun_runtime import (
    AgentRegistrationError,
    InvalidAIDError,
    InvalidGroupIdError,
    InvalidMessageError,
    PayloadTooLargeError,
    ToolCallPayload,
)
from aun_runtime.testing import Recorder

from .conftest import RuntimeFactory


async def test_invalid_input_is_refused_with_specific_errors(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("rec.local", Recorder)
    await runtime.create_group("room", ["rec.local"])
    await runtime.start()

    with pytest.raises(InvalidAIDError, match="lowercase"):
        await runtime.send("Rec.local", "hi")
    with pytest.raises(InvalidAIDError, match="domain"):
        await runtime.send("rec", "hi")
    with pytest.raises(InvalidAIDError):
        await runtime.register_agent("bad aid.local", Recorder)
    with pytest.raises(AgentRegistrationError, match="already registered"):
        await runtime.register_agent("rec.local", Recorder)
    with pytest.raises(InvalidGroupIdError):
        await runtime.create_group("Bad Group!", [])
    with pytest.raises(PayloadTooLargeError, match="1000000-byte"):
        await runtime.send("rec.local", "x" * 1_000_001)
    with pytest.raises(InvalidMessageError, match="text payloads"):
        await runtime.group_send(
            "room", ToolCallPayload(call_id="1", name="t"), sender="rec.local", mentions=["rec.local"]
        )
    with pytest.raises(InvalidMessageError, match="dispatch mode"):
        await runtime.set_dispatch_mode("room", "whisper")
    with pytest.raises(InvalidMessageError) as info:
        await runtime.send("rec.local", {"type": "tool_result", "call_id": "c", "ok": False})
    assert info.value.field is not None and "payload" in info.value.field
    # Text UTF-8 cannot carry (a lone surrogate) would fail at every write: refused at the send.
    with pytest.raises(InvalidMessageError, match="lone surrogate") as info:
        await runtime.send("rec.local", "half a pair: \ud800")
    assert info.value.field == "payload"
    with pytest.raises(InvalidMessageError, match="lone surrogate"):
        await runtime.group_send("room", {"type": "json", "kind": "x.y", "data": {"k": "\udfff"}}, sender="rec.local")
    with pytest.raises(InvalidMessageError, match="128 characters") as info:
        await runtime.send("rec.local", "hi", message_id="x" * 129)
    assert info.value.field == "message_id"
    await runtime.settle()

    recorder = await runtime.agent_instance("rec.local", Recorder)
    assert recorder.received == []
    assert runtime.stats.sent == 0
