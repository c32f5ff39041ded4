"""A mailbox that fills is logged once per full episode: one warning when it fills, one info line
when it has drained, nothing per message, and nothing at all while there is room."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest

from aun_runtime import AUNActorRuntime, AUNRuntime, AUNSingleThreadedRuntime, Mailbox
from aun_runtime.testing import Gate, Recorder


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "mailbox of" in r.getMessage()
    ]


def _ends(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.INFO and "no longer full" in r.getMessage()
    ]


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="aun_runtime")


async def _turn() -> None:
    """Let waiting senders queue up and the episode's warning be written."""
    for _ in range(3):
        await asyncio.sleep(0)


async def test_several_waiting_senders_log_one_warning_naming_the_agent_the_count_and_the_senders(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mailbox = Mailbox(capacity=1, owner="slow.local")
    assert mailbox.try_reserve("held")
    senders = [asyncio.create_task(mailbox.reserve(f"m{n}", f"s{n}.local")) for n in range(5)]
    await _turn()
    late = asyncio.create_task(mailbox.reserve("late", "late.local"))  # same episode: only counted
    await _turn()

    assert _warnings(caplog) == [
        "mailbox of slow.local is full (capacity 1): 5 waiting for room, from s0.local, s1.local, s2.local and 2 more"
    ]
    for _ in range(7):  # the held place, then each sender's
        mailbox.release()
        await _turn()
    await asyncio.gather(*senders, late)
    assert len(_warnings(caplog)) == 1
    [end] = _ends(caplog)
    assert end.startswith("mailbox of slow.local is no longer full, after ")
    assert end.endswith(": 6 waited, 0 refused, 0 queued over the bound")


async def test_a_mailbox_that_drains_and_fills_again_logs_a_second_episode(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mailbox = Mailbox(capacity=4, owner="slow.local")
    for episode in range(2):
        for n in range(4):
            assert mailbox.try_reserve(f"{episode}-{n}")
        waiting = asyncio.create_task(mailbox.reserve(f"{episode}-wait", "fast.local"))
        await _turn()
        assert len(_warnings(caplog)) == episode + 1
        mailbox.release()  # handed to the waiter: still full, the episode goes on
        await waiting
        mailbox.release()
        mailbox.release()  # 2 of 4: the low-water mark, the episode is over
        assert len(_ends(caplog)) == episode + 1
        mailbox.release()
        mailbox.release()
        assert mailbox.occupancy == 0
    assert (
        _warnings(caplog)
        == ["mailbox of slow.local is full (capacity 4): 1 waiting for room, from fast.local"] * 2
    )


async def test_refusals_and_overflows_start_an_episode_too(caplog: pytest.LogCaptureFixture) -> None:
    refusing = Mailbox(capacity=1, overflow="dead_letter", owner="gate.local")
    assert refusing.try_reserve("a")
    for n in range(3):
        assert not await refusing.enter(f"m{n}", "app.local")
    await _turn()
    assert _warnings(caplog) == [
        "mailbox of gate.local is full (capacity 1): 0 waiting for room, from app.local; 3 refused"
    ]

    caplog.clear()
    overflowing = Mailbox(capacity=1, block_timeout=0.01, owner="slow.local")
    assert overflowing.take_if_room("a")
    assert await overflowing.enter("b", "app.local")  # waits, then is queued over the bound
    assert overflowing.arrive("c")  # a core that cannot push back: over the bound at once
    await _turn()
    assert _warnings(caplog) == [
        "mailbox of slow.local is full (capacity 1): 1 waiting for room, from app.local"
    ]
    for _ in range(3):
        overflowing.release()
    assert _ends(caplog)[0].endswith(": 1 waited, 0 refused, 2 queued over the bound")


async def test_a_mailbox_that_never_fills_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    mailbox = Mailbox(capacity=2, owner="roomy.local")
    for n in range(100):
        await mailbox.reserve(f"m{n}", "app.local")
        assert mailbox.take_if_room(f"m{n}")  # the reservation is consumed
        mailbox.release()
        assert mailbox.take_if_room(f"unreserved{n}")
        mailbox.release()
    await _turn()
    assert not caplog.records


@pytest.mark.parametrize("core", [AUNActorRuntime, AUNSingleThreadedRuntime])
async def test_a_runtime_logs_a_full_mailbox_once_per_episode_with_its_senders(
    core: type[AUNActorRuntime] | type[AUNSingleThreadedRuntime], caplog: pytest.LogCaptureFixture
) -> None:
    async with AUNRuntime(core=core(), mailbox_capacity=2, block_timeout=2.0) as runtime:
        await runtime.register_agent("slow.local", lambda: Recorder(delay=0.002))
        senders = [await runtime.open_inbox(f"sender{n}.local") for n in range(4)]
        await runtime.start()

        async def burst(round_: int) -> None:
            await asyncio.gather(
                *(inbox.send("slow.local", f"{round_}-{n}") for n in range(5) for inbox in senders)
            )
            await runtime.settle()

        await burst(0)
        [first] = _warnings(caplog)
        match = re.fullmatch(
            r"mailbox of slow\.local is full \(capacity 2\): (\d+) waiting for room, from (.+) and 1 more",
            first,
        )
        assert match is not None, first
        assert 1 < int(match[1]) <= 18  # 20 sent, 2 had room
        named = match[2].split(", ")
        assert len(named) == 3 and set(named) < {inbox.aid for inbox in senders}
        [end] = _ends(caplog)
        assert end.startswith("mailbox of slow.local is no longer full, after ")

        await burst(1)  # drained, so filling again is a new episode
        assert len(_warnings(caplog)) == 2
        assert len(_ends(caplog)) == 2
        slow = await runtime.agent_instance("slow.local", Recorder)
        assert len(slow.received) == 40
        assert runtime.stats.dead_letters == 0


async def test_group_posts_that_wait_in_the_actor_core_name_their_senders(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with AUNRuntime(mailbox_capacity=1, block_timeout=2.0) as runtime:
        await runtime.register_agent("gate.local", Gate)
        posters = [f"poster{n}.local" for n in range(3)]
        for aid in posters:
            await runtime.open_inbox(aid)
        await runtime.create_group("room.local", ["gate.local", *posters])
        await runtime.start()

        posts = [
            asyncio.create_task(runtime.group_send("room.local", f"hello {n}", sender=aid))
            for n, aid in enumerate(posters)
        ]
        gate = await runtime.agent_instance("gate.local", Gate)
        await asyncio.wait_for(gate.started.wait(), 1)
        await _turn()
        [warning] = _warnings(caplog)
        assert warning.startswith("mailbox of gate.local is full (capacity 1): ")
        assert "from poster1.local" in warning
        gate.opened.set()
        await asyncio.gather(*posts)
        await runtime.settle()
        assert len(gate.received) == 3
        assert len(_warnings(caplog)) == 1
        assert len(_ends(caplog)) == 1


async def test_a_runtime_whose_mailboxes_never_fill_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    async with AUNRuntime(mailbox_capacity=64) as runtime:
        await runtime.register_agent("slow.local", lambda: Recorder(delay=0.001))
        inbox = await runtime.open_inbox()
        await runtime.start()
        for n in range(20):
            await inbox.send("slow.local", str(n))
        await runtime.settle()
    assert not _warnings(caplog) and not _ends(caplog)
