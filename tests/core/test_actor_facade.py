"""AUNRuntime on the actor core: one mailbox per AID enforced once, stop that leaves a trail, the default."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from autogen_core import AgentId

from aun_runtime import (
    AUNActorRuntime,
    AUNAgent,
    AUNMessage,
    AUNRuntime,
    AUNSingleThreadedRuntime,
    MessageContext,
    RecordKind,
    event,
)
from aun_runtime.testing import Gate, Recorder

CORES: dict[str, Callable[[], object]] = {
    "single-threaded": AUNSingleThreadedRuntime,
    "actor": AUNActorRuntime,
}


def test_the_actor_runtime_is_the_default_core() -> None:
    assert isinstance(AUNRuntime().core, AUNActorRuntime)


async def test_the_core_enforces_the_facades_mailbox_itself() -> None:
    core = AUNActorRuntime()
    async with AUNRuntime(core=core, mailbox_capacity=3) as runtime:
        await runtime.register_agent("rec.local", Recorder)
        await runtime.send("rec.local", "hi")
        assert core.mailbox(AgentId("rec.local", "default")) is runtime.mailbox("rec.local")
        assert runtime.mailbox("rec.local").capacity == 3


@pytest.mark.parametrize("kind", sorted(CORES))
async def test_a_group_flood_against_a_slow_member_stays_within_the_bound(kind: str) -> None:
    runtime = AUNRuntime(core=CORES[kind](), mailbox_capacity=4)  # type: ignore[arg-type]
    await runtime.register_agent("fast.local", Recorder)
    await runtime.register_agent("slow.local", lambda: Recorder(delay=0.001))
    await runtime.register_agent("poster.local", Recorder)
    await runtime.create_group("room", ["fast.local", "slow.local", "poster.local"])
    await runtime.start()

    for n in range(60):
        await runtime.group_send("room", str(n), sender="poster.local")
    await runtime.settle()

    slow = await runtime.agent_instance("slow.local", Recorder)
    assert [m.text for m in slow.received] == [str(n) for n in range(60)]
    assert runtime.mailbox("slow.local").high_water <= 4
    assert runtime.mailbox("slow.local").overflowed == 0
    assert runtime.stats.dead_letters == 0
    await runtime.close()


async def test_stop_with_messages_queued_records_them_as_dead_letters() -> None:
    runtime = AUNRuntime(core=AUNActorRuntime())
    await runtime.register_agent("gate.local", Gate)
    inbox = await runtime.open_inbox()
    await runtime.start()
    sent = [await inbox.send("gate.local", f"m{n}") for n in range(4)]
    gate = await runtime.agent_instance("gate.local", Gate)
    await asyncio.wait_for(gate.started.wait(), timeout=5)

    await asyncio.wait_for(runtime.stop(), timeout=5)

    dead = runtime.archive.history("gate.local", kinds=[RecordKind.DEAD_LETTER])
    assert [r.message for r in dead] == sent  # the interrupted one first, then those never started
    assert all("RuntimeStoppedError" in (r.reason or "") for r in dead)
    assert runtime.stats.dead_letters == 4
    assert runtime.mailbox("gate.local").occupancy == 0
    await runtime.close()


@pytest.mark.parametrize("kind", sorted(CORES))
async def test_stop_with_handlers_in_flight_neither_hangs_nor_raises(kind: str) -> None:
    errors: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: errors.append(context))
    runtime = AUNRuntime(core=CORES[kind]())  # type: ignore[arg-type]
    await runtime.register_agent("gate.local", Gate)
    inbox = await runtime.open_inbox()
    await runtime.start()
    for n in range(4):
        await inbox.send("gate.local", f"m{n}")
    gate = await runtime.agent_instance("gate.local", Gate)
    await asyncio.wait_for(gate.started.wait(), timeout=5)

    await asyncio.wait_for(runtime.stop(), timeout=5)
    gate.opened.set()
    for _ in range(10):
        await asyncio.sleep(0)

    # autogen-core 0.7.5 raises "task_done() called too many times" from handlers still running.
    assert errors == []
    handled_or_recorded = len(gate.received) + runtime.stats.dead_letters
    assert handled_or_recorded == 4  # the actor core records them; autogen-core lets running ones finish
    await runtime.close()


class ReturnsSomething(AUNAgent):
    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        return "an answer"  # type: ignore[return-value]  # an @event handler must not return one


@pytest.mark.parametrize("kind", sorted(CORES))
async def test_an_event_handler_that_returns_a_value_is_a_dead_letter(kind: str) -> None:
    runtime = AUNRuntime(core=CORES[kind]())  # type: ignore[arg-type]
    await runtime.register_agent("answers.local", ReturnsSomething)
    await runtime.start()
    await runtime.send("answers.local", "question")
    await runtime.settle()
    [dead] = runtime.archive.dead_letters()
    assert "ValueError" in (dead.reason or "") and dead.owner == "answers.local"
    await runtime.close()
