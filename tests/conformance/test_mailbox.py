"""The actor rule: one message at a time per agent, in arrival order, with a bound and a policy."""

from __future__ import annotations

import asyncio
import random

from aun_runtime import AUNAgent, AUNMessage, MailboxFullError, MessageContext, RecordKind, event
from aun_runtime.testing import Gate, Recorder

from .conftest import RuntimeFactory


class Jittery(AUNAgent):
    """Awaits a random while in each handler: without a mailbox, handlers would overlap and reorder."""

    def __init__(self) -> None:
        super().__init__("awaits at random")
        self.order: list[int] = []
        self.running = 0
        self.max_running = 0
        self.rng = random.Random(7)

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        await asyncio.sleep(self.rng.random() / 500)
        self.order.append(int(message.text or "-1"))
        self.running -= 1


async def test_one_message_at_a_time_in_arrival_order(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("jitter.local", Jittery)
    inbox = await runtime.open_inbox()
    await runtime.start()

    for n in range(60):
        await inbox.send("jitter.local", str(n))
    await runtime.settle()

    agent = await runtime.agent_instance("jitter.local", Jittery)
    assert agent.max_running == 1
    assert agent.order == list(range(60))


async def test_block_policy_holds_a_fast_sender_to_the_bound_and_loses_nothing(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(mailbox_capacity=4, overflow="block")
    await runtime.register_agent("slow.local", lambda: Recorder(delay=0.001))
    inbox = await runtime.open_inbox()
    await runtime.start()

    for n in range(100):
        await inbox.send("slow.local", str(n))
    await runtime.settle()

    slow = await runtime.agent_instance("slow.local", Recorder)
    mailbox = runtime.mailbox("slow.local")
    assert [m.text for m in slow.received] == [str(n) for n in range(100)]
    assert mailbox.high_water <= 4
    assert mailbox.occupancy == 0
    assert runtime.stats.dead_letters == 0


async def test_dead_letter_policy_refuses_at_once_and_records_every_refusal(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(mailbox_capacity=3, overflow="dead_letter")
    await runtime.register_agent("gate.local", Gate)
    inbox = await runtime.open_inbox()
    await runtime.start()

    accepted, refused = 0, 0
    for n in range(10):
        try:
            await inbox.send("gate.local", str(n))
            accepted += 1
        except MailboxFullError:
            refused += 1
    gate = await runtime.agent_instance("gate.local", Gate)
    gate.opened.set()
    await runtime.settle()

    assert accepted == 3 and refused == 7
    assert len(gate.received) == accepted
    dead = runtime.archive.dead_letters()
    assert len(dead) == refused
    assert all("MailboxFullError" in (r.reason or "") for r in dead)
    assert {r.message.text for r in dead if r.message} == {str(n) for n in range(3, 10)}


async def test_block_policy_times_out_into_a_dead_letter_instead_of_hanging(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(mailbox_capacity=1, overflow="block", block_timeout=0.05)
    await runtime.register_agent("gate.local", Gate)
    inbox = await runtime.open_inbox()
    await runtime.start()

    await inbox.send("gate.local", "first")
    try:
        await inbox.send("gate.local", "second")
        raised = False
    except MailboxFullError:
        raised = True
    gate = await runtime.agent_instance("gate.local", Gate)
    gate.opened.set()
    await runtime.settle()

    assert raised
    assert [m.text for m in gate.received] == ["first"]
    [dead] = runtime.archive.history("app.local", kinds=[RecordKind.DEAD_LETTER])
    assert dead.message is not None and dead.message.text == "second"
