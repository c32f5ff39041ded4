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
    await runtime.settle()

    recorder = await runtime.agent_instance("rec.local", Recorder)
    assert recorder.received == []
    assert runtime.stats.sent == 0
