"""The archive: batched writes, reads that see everything, exactly once per owner, survives a restart."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from aun_runtime import Archive, AUNMessage, AUNRuntime, RecordKind, TextPayload
from aun_runtime.storage import open_storage
from aun_runtime.testing import Recorder
from tests.conftest import Stores


def _message(n: int) -> AUNMessage:
    return AUNMessage(message_id=f"m{n}", from_aid="a.local", to="b.local", payload=TextPayload(text=f"#{n}"))


def _rows_on_disk(location: str) -> int:
    """Records committed, as another connection (another process) sees them."""
    other = open_storage(location, read_only=True)
    try:
        return int(other.fetch("SELECT COUNT(*) FROM archive")[0][0])
    finally:
        other.close()


def test_writes_are_batched_and_every_read_sees_them(store: Stores) -> None:
    path = store("archive")
    archive = Archive(path, batch_size=10, flush_interval=60)
    for n in range(9):
        archive.record("b.local", RecordKind.RECEIVED, _message(n))
    assert _rows_on_disk(path) == 0  # still waiting for a full batch
    archive.record("b.local", RecordKind.RECEIVED, _message(9))  # the batch is full: handed over
    archive.record("b.local", RecordKind.RECEIVED, _message(10))
    assert [r.text for r in archive.history("b.local")][-1] == "#10"  # a read writes everything first
    assert _rows_on_disk(path) == 11
    # the full batch, then the one record the read pushed out (in one transaction if they met)
    assert archive.transactions in (1, 2)
    archive.close()


async def test_a_timer_writes_a_partial_batch(store: Stores) -> None:
    import asyncio

    path = store("archive")
    archive = Archive(path, batch_size=1000, flush_interval=0.01)
    archive.record("b.local", RecordKind.RECEIVED, _message(1))
    for _ in range(100):  # the timer fires within 0.01 s; the write takes a moment more
        await asyncio.sleep(0.02)
        if _rows_on_disk(path):
            break
    assert _rows_on_disk(path) == 1
    archive.close()


def test_a_failed_write_is_reported_and_its_records_are_kept(tmp_path: Path) -> None:
    import pytest

    from aun_runtime import ArchiveWriteError
    from protocols.errors import AUNError

    path = tmp_path / "a.sqlite"
    archive = Archive(path)
    with sqlite3.connect(path) as other:  # another process holds the write lock
        other.execute("PRAGMA busy_timeout = 0")
        other.execute("BEGIN IMMEDIATE")
        archive._writer._db.db.execute("PRAGMA busy_timeout = 0")
        archive.record("b.local", RecordKind.RECEIVED, _message(1))
        with pytest.raises(ArchiveWriteError, match="locked") as raised:
            archive.flush()
        # One of the runtime's errors, and still what callers caught before.
        assert isinstance(raised.value, AUNError) and isinstance(raised.value, RuntimeError)
        other.execute("ROLLBACK")
    archive.flush()  # the kept batch goes in now
    assert [r.text for r in archive.history("b.local")] == ["#1"]
    archive.close()


def test_history_survives_a_restart(store: Stores) -> None:
    path = store("a")
    archive = Archive(path)
    message = _message(1)
    archive.record("b.local", RecordKind.RECEIVED, message)
    archive.record_thought("b.local", "hmm")
    archive.close()

    reopened = Archive(path)
    records = reopened.history("b.local")
    assert [(r.kind, r.text) for r in records] == [(RecordKind.RECEIVED, "#1"), (RecordKind.THOUGHT, "hmm")]
    assert records[0].message == message
    reopened.close()


async def test_a_restarted_runtime_recognises_a_redelivery(store: Stores) -> None:
    path = store("runtime")
    first = AUNRuntime(archive=path)
    await first.register_agent("rec.local", Recorder)
    await first.start()
    await first.send("rec.local", "once", message_id="stable-id")
    await first.settle()
    await first.close()

    second = AUNRuntime(archive=path)
    await second.register_agent("rec.local", Recorder)
    await second.start()
    await second.send("rec.local", "once", message_id="stable-id")  # e.g. a retry after a crash
    await second.settle()

    recorder = await second.agent_instance("rec.local", Recorder)
    assert recorder.received == []
    assert second.stats.duplicates == 1
    await second.close()


def test_a_thought_watcher_hears_each_thought_until_it_stops() -> None:
    archive = Archive()
    heard: list[tuple[str, str, str | None]] = []
    stop = archive.watch_thoughts(lambda owner, text, about: heard.append((owner, text, about)))
    archive.record_thought("a.local", "first", about="m-1")
    stop()
    stop()  # stopping twice is harmless
    archive.record_thought("a.local", "second")
    assert heard == [("a.local", "first", "m-1")]
    assert [record.text for record in archive.history("a.local")] == ["first", "second"]  # both recorded
    archive.close()
