"""The outbox: committed before a send returns, in order after a reopen, bounded, and lanes by destination."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from aun_runtime.network import OutboxFullError, OutboxWriteError
from aun_runtime.network._outbox import Outbox
from protocols.aun import AUNMessage, TextPayload

SENDER = "alice.aun.localhost"


def message(text: str, to: str = "bobby.aun.localhost") -> AUNMessage:
    return AUNMessage(from_aid=SENDER, to=to, payload=TextPayload(text=text))


async def test_taken_messages_survive_a_reopen_in_order_and_removed_ones_do_not(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite"
    outbox = Outbox(path)
    items = await asyncio.gather(*(outbox.put(SENDER, "bobby.aun.localhost", message(f"m{i}")) for i in range(50)))
    assert outbox.commits <= 2  # a burst shares its commit
    assert [i.id for i in items] == sorted(i.id for i in items)
    for item in items[:20]:
        outbox.remove(item)
    assert len(outbox) == 30
    await outbox.close()

    again = Outbox(path)
    waiting = again.take_waiting()
    assert [i.message.text for i in waiting] == [f"m{i}" for i in range(20, 50)]
    assert [i.message for i in waiting] == [i.message for i in items[20:]]  # whole messages, not only text
    assert again.take_waiting() == []  # handed out once
    later = await again.put(SENDER, "bobby.aun.localhost", message("later"))
    assert later.id > waiting[-1].id  # new messages go after what was waiting
    await again.close()


async def test_a_removal_not_yet_committed_at_a_crash_only_means_sending_again(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite"
    outbox = Outbox(path)
    item = await outbox.put(SENDER, "bobby.aun.localhost", message("once"))
    outbox.remove(item)  # committed shortly after, not at once: simulate dying before that
    crashed = Outbox(path)
    assert [i.message.text for i in crashed.take_waiting()] == ["once"]
    await crashed.close()
    await outbox.close()


async def test_the_outbox_is_bounded_and_refuses_at_capacity(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox.sqlite", capacity=3)
    items = [await outbox.put(SENDER, "bobby.aun.localhost", message(f"m{i}")) for i in range(3)]
    with pytest.raises(OutboxFullError, match="holds 3 messages"):
        await outbox.put(SENDER, "bobby.aun.localhost", message("one too many"))
    outbox.remove(items[0])
    await outbox.put(SENDER, "bobby.aun.localhost", message("room again"))
    await outbox.close()
    with pytest.raises(OutboxWriteError, match="closed"):
        await outbox.put(SENDER, "bobby.aun.localhost", message("after close"))


async def test_lanes_are_per_destination(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox.sqlite")
    direct = await outbox.put(SENDER, "bobby.aun.localhost", message("hi"))
    other = await outbox.put(SENDER, "carol.aun.localhost", message("hi", to="carol.aun.localhost"))
    group = await outbox.put(SENDER, None, AUNMessage(from_aid=SENDER, group_id="crew.aun.localhost", payload=TextPayload(text="all")))
    assert (direct.lane, other.lane, group.lane) == ("bobby.aun.localhost", "carol.aun.localhost", "group:crew.aun.localhost")
    await outbox.close()


async def test_a_failed_commit_refuses_the_message_instead_of_losing_it(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox.sqlite")
    await outbox.put(SENDER, "bobby.aun.localhost", message("fine"))
    outbox._executor.submit(outbox.store.storage.execute, "DROP TABLE outbox").result()  # the file is damaged under it
    with pytest.raises(OutboxWriteError, match="could not commit"):
        await outbox.put(SENDER, "bobby.aun.localhost", message("lost?"))
    assert len(outbox) == 1  # the refused message is not counted as waiting
    await outbox.close()
