"""`AUNRuntime` is a facade over parts it delegates to: every public name it had is still answered,
by the runtime itself or by the part bound in its place, and what an agent calls on it
(`AgentHost`) reaches the part that holds the state."""

from __future__ import annotations

import pytest

from aun_runtime import AgentHost, AUNAgent, AUNRuntime, RecordKind, UnknownAIDError

#: The facade's public names (methods, the property, and the agent-facing calls bound to its parts).
PUBLIC = (
    "add_member", "agent_card", "agent_info", "agent_instance", "aids", "busy", "close", "create_group",
    "deliver_remote", "group", "group_send", "groups", "handler_timeout_of", "is_agent", "is_local",
    "keep_task", "mailbox", "on_stop", "open_inbox", "outbound_route", "ping", "record_budget_stop",
    "record_dead_letter", "record_model_anomaly", "redrive", "register_agent", "remove_member", "send",
    "send_as", "send_message", "set_dispatch_mode", "set_outbound_route", "settle", "start", "stop",
    "stop_when_idle", "transcript", "was_member",
)


class Quiet(AUNAgent):
    """Says nothing."""


async def test_every_public_name_and_every_agent_host_member_is_answered() -> None:
    runtime = AUNRuntime()
    try:
        host_members = [name for name in vars(AgentHost) if not name.startswith("_")]
        assert "send_as" in host_members and "record_dead_letter" in host_members
        missing = [name for name in (*PUBLIC, *host_members) if not hasattr(runtime, name)]
        assert missing == []
    finally:
        await runtime.close()


async def test_the_agent_facing_calls_reach_the_table_and_the_failure_log() -> None:
    runtime = AUNRuntime(handler_timeout=7.0)
    await runtime.register_agent("quiet.local", Quiet, handler_timeout=3.0)
    await runtime.open_inbox("desk.local")
    try:
        assert runtime.handler_timeout_of("quiet.local") == 3.0
        assert runtime.handler_timeout_of("desk.local") == 7.0
        assert runtime.is_agent("quiet.local") and not runtime.is_agent("desk.local")
        assert runtime.is_local("desk.local") and not runtime.is_local("nobody.local")
        with pytest.raises(UnknownAIDError):
            runtime.handler_timeout_of("nobody.local")
        runtime.record_dead_letter("quiet.local", None, RuntimeError("boom"))
        dead = runtime.archive.records(kinds=[RecordKind.DEAD_LETTER])
    finally:
        await runtime.close()
    assert [(record.owner, runtime.stats.dead_letters) for record in dead] == [("quiet.local", 1)]
    assert "boom" in (dead[0].reason or "")
