"""The journal and the streams, without processes: atomic handling, ordered streams."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from aun_runtime import RecordKind
from aun_runtime.distributed import _journal as journal_module
from aun_runtime.distributed._inbound import Inbound
from aun_runtime.distributed._journal import DELIVERY, Commit, Delivery, JournalArchive
from aun_runtime.storage import open_storage
from tests.conftest import Stores


def _in_streams_on_disk(location: str) -> set[tuple[str, str, int]]:
    """Stream positions committed, as another connection (another process) sees them."""
    other = open_storage(location, read_only=True)
    try:
        return {(str(o), str(a), int(n)) for o, a, n in other.fetch("SELECT origin, aid, through FROM aun_in_streams")}
    finally:
        other.close()


def test_what_a_handler_records_is_written_only_with_its_stream_position(store: Stores) -> None:
    path = store("w")
    journal = JournalArchive(path, worker="w")
    scope = Delivery("w-origin", "sink.local", 1)
    token = DELIVERY.set(scope)
    journal.record_thought("sink.local", "half-way through")
    DELIVERY.reset(token)
    journal.flush()  # a read or a full batch flushes: the open handling must not leak into it
    assert journal.count(kind=RecordKind.THOUGHT) == 0
    assert _in_streams_on_disk(path) == set()

    journal.seal(scope, 1)
    journal.flush()
    assert journal.count(kind=RecordKind.THOUGHT) == 1
    assert _in_streams_on_disk(path) == {("w-origin", "sink.local", 1)}
    journal.close()
    assert JournalArchive(path, worker="w").load_in_streams() == {("w-origin", "sink.local"): 1}


def test_a_stream_is_handed_over_once_and_in_order(tmp_path: Path) -> None:
    inbound = Inbound(JournalArchive(tmp_path / "i.sqlite"))
    assert inbound.accept("a", "x.local", 2, 1, "two") == ([], False)  # early: waits for 1
    assert inbound.accept("a", "x.local", 1, 1, "one") == ([(1, "one"), (2, "two")], False)
    assert inbound.accept("a", "x.local", 2, 1, "two") == ([], False)  # being handled: skipped
    inbound.committed({("a", "x.local"): 2})
    assert inbound.accept("a", "x.local", 1, 1, "one") == ([], True)  # handled: skipped, acknowledged again
    # A new holder of an AID starts at the sender's base: what is below was handled elsewhere.
    assert inbound.accept("b", "x.local", 40, 40, "forty") == ([(40, "forty")], False)


def test_a_stream_position_never_jumps_a_delivery_that_was_abandoned(tmp_path: Path) -> None:
    inbound = Inbound(JournalArchive(tmp_path / "g.sqlite"))
    ready, _ = inbound.accept("a", "x.local", 1, 1, "one")
    ready += inbound.accept("a", "x.local", 2, 1, "two")[0]
    ready += inbound.accept("a", "x.local", 3, 1, "three")[0]
    assert [seq for seq, _ in ready] == [1, 2, 3]
    assert inbound.sealed("a", "x.local", 1) == 1
    # 2 was cancelled half-way (the worker stopping); 3 finishing must not carry the position past 2
    assert inbound.sealed("a", "x.local", 3) is None


async def test_commits_after_deliveries_are_spaced_but_a_lone_one_and_a_send_are_not_held_back(
    store: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "IDLE_COMMIT_GAP", 0.2)  # wide, so that a slow machine cannot blur it
    journal = JournalArchive(store("c"), commit_interval=1.0, worker="c")  # the busy timer: later than the gap
    commits: list[Commit] = []
    journal.on_commit = commits.append
    busy = [False]
    journal.busy = lambda: busy[0]

    def delivered(seq: int) -> None:  # as the delivery path does: sealed while busy, then idle
        busy[0] = True
        journal.seal(Delivery("w-origin", "sink.local", seq), seq)
        busy[0] = False
        journal.commit_soon()

    delivered(1)
    await asyncio.sleep(0.05)
    assert [c.handled for c in commits] == [{("w-origin", "sink.local"): 1}]  # a lone delivery: at once
    delivered(2)
    await asyncio.sleep(0.05)
    delivered(3)
    await asyncio.sleep(0.05)
    assert len(commits) == 1  # within the gap: held back, and nothing of it is durable yet
    assert _in_streams_on_disk(store("c")) == {("w-origin", "sink.local", 1)}
    await asyncio.sleep(0.2)
    assert [c.handled for c in commits][1:] == [{("w-origin", "sink.local"): 3}]  # both in one commit

    journal.outbox_add("other.local", 1, b"event")  # a send outside any handling
    journal.request_commit()
    await asyncio.sleep(0.05)
    assert [c.outbox for c in commits][2:] == [[("other.local", 1)]]
    journal.close()
