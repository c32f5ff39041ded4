"""Following an archive: oldest-first paging, read-only opening, and the table of who takes part."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from aun_runtime import Archive, AUNMessage, AUNRuntime, RecordKind, TextPayload
from aun_runtime.testing import Recorder


def _message(n: int) -> AUNMessage:
    return AUNMessage(message_id=f"m{n}", from_aid="a.local", to="b.local", payload=TextPayload(text=f"#{n}"))


def test_records_after_pages_oldest_first_without_gaps_or_repeats() -> None:
    archive = Archive(":memory:")
    for n in range(25):
        archive.record("b.local", RecordKind.RECEIVED, _message(n))
    seen: list[str | None] = []
    cursor = 0
    while page := archive.records_after(cursor, limit=10):
        assert [r.id for r in page] == sorted(r.id for r in page)
        assert all(r.id > cursor for r in page)
        cursor = page[-1].id
        seen += [r.text for r in page]
    assert seen == [f"#{n}" for n in range(25)]
    # records() answers "what happened last": the same limit gives the newest, not the next.
    assert archive.records(after_id=0, limit=10)[0].text == "#15"
    assert archive.last_id() == cursor
    archive.close()


def test_read_only_archive_sees_the_writer_and_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite"
    writer = Archive(path)
    writer.record("b.local", RecordKind.RECEIVED, _message(1))
    writer.flush()
    reader = Archive(path, read_only=True)
    assert [r.text for r in reader.records_after(0)] == ["#1"]
    writer.record("b.local", RecordKind.RECEIVED, _message(2))
    writer.flush()  # WAL: the reader sees each committed batch while the writer keeps the file open
    assert [r.text for r in reader.records_after(1)] == ["#2"]
    with pytest.raises(RuntimeError, match="read-only"):
        reader.record_thought("b.local", "not here")
    with pytest.raises(RuntimeError, match="read-only"):
        reader.record_agent("x.local", role="agent", mode="autonomous", description="")
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader._writer.read(lambda db: db.execute("DELETE FROM records"))  # SQLite refuses: mode=ro
    reader.close()
    writer.close()


def test_read_only_open_of_a_missing_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="AUNRuntime\\(archive=path\\)"):
        Archive(tmp_path / "nothing.sqlite", read_only=True)
    assert not (tmp_path / "nothing.sqlite").exists()  # looking did not create it


async def test_registration_records_agents_and_inboxes(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite"
    runtime = AUNRuntime(archive=path)
    await runtime.start()
    await runtime.register_agent("rec.local", Recorder, description="keeps everything")
    await runtime.open_inbox("app.local")
    reader = Archive(path, read_only=True)
    # Registrations are written in batches, with the records: another process sees them once
    # committed (within the flush interval, or at a settle, as here).
    assert reader.agents() == []
    await runtime.settle()
    entries = {entry.aid: entry for entry in reader.agents()}
    assert entries["rec.local"].role == "agent"
    assert entries["rec.local"].mode == "autonomous"
    assert entries["rec.local"].description == "keeps everything"
    assert entries["rec.local"].card is None
    assert entries["app.local"].role == "inbox"
    await runtime.close()


def test_an_archive_from_before_the_agents_table_reads_as_no_agents(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    archive = Archive(path)
    archive._writer.read(lambda db: db.execute("DROP TABLE agents"))
    archive.close()
    assert Archive(path, read_only=True).agents() == []


def test_rows_after_keeps_each_message_as_stored() -> None:
    archive = Archive(":memory:")
    message = _message(1)
    archive.record("b.local", RecordKind.RECEIVED, message)
    archive.record_thought("b.local", "hm", about="m1")
    archive.record_event("a.local", RecordKind.DEAD_LETTER, "no route", None)
    # A follower reads what is written; it never makes the writer hurry, nor waits for it.
    assert archive.rows_after(0) == [] and archive.last_id() == 0
    archive.flush()
    received, thought, dead = archive.rows_after(0)
    assert archive.last_id() == dead.id
    assert received.is_message and received.body == message.to_json()
    assert AUNMessage.from_json(received.body) == message
    assert (thought.kind, thought.body, thought.about, thought.is_message) == ("thought", "hm", "m1", False)
    assert (dead.kind, dead.reason, dead.body, dead.is_message) == (
        "dead_letter",
        "no route",
        "no route",
        False,
    )
    assert [r.id for r in archive.rows_after(received.id)] == [thought.id, dead.id]
    archive.close()
