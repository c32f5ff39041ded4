"""The archive writes each message's row once, whichever batch its records land in."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from aun_runtime import Archive, AUNMessage, RecordKind
from aun_runtime.storage._archive_writer import ArchiveWriteError
from protocols.aun import TextPayload


def _message(n: int) -> AUNMessage:
    return AUNMessage(from_aid="a.local", to="b.local", payload=TextPayload(text=f"hi {n}"))


def test_records_of_one_message_in_different_batches_share_its_row(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "a.sqlite", batch_size=3)
    messages = [_message(n) for n in range(5)]
    for message in messages:
        archive.record("a.local", RecordKind.SENT, message)
    archive.flush()
    for message in messages:  # the receipts come later, in other batches
        archive.record("b.local", RecordKind.RECEIVED, message)
    archive.record_thought("b.local", "five of them", about=messages[0].message_id)
    archive.record_event("b.local", RecordKind.DEAD_LETTER, "no room", None)
    archive.close()

    db = sqlite3.connect(tmp_path / "a.sqlite")
    assert db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 5
    rows = db.execute("SELECT owner, kind, message_id, body FROM archive ORDER BY id").fetchall()
    assert [(owner, kind) for owner, kind, _, _ in rows] == [("a.local", "sent")] * 5 + [
        ("b.local", "received")
    ] * 5 + [("b.local", "thought"), ("b.local", "dead_letter")]
    assert [message_id for _, _, message_id, _ in rows[5:10]] == [m.message_id for m in messages]
    assert [body for _, _, _, body in rows[5:10]] == [m.to_json() for m in messages]
    assert rows[10][3] == "five of them" and rows[11][3] == "no room"


def test_a_failed_write_is_written_again_with_its_message_rows(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "a.sqlite")
    message = _message(1)
    archive.record("a.local", RecordKind.SENT, message)
    # Another connection holds the write lock: the writer's transaction fails.
    blocker = sqlite3.connect(tmp_path / "a.sqlite", timeout=0, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    archive._writer._db.db.execute("PRAGMA busy_timeout = 0")
    with pytest.raises(ArchiveWriteError):
        archive.flush()
    archive.record("b.local", RecordKind.RECEIVED, message)  # refers to the row not yet written
    blocker.execute("ROLLBACK")
    archive.flush()
    records = archive.history("b.local") + archive.history("a.local")
    assert [(r.kind, r.message.message_id if r.message else None) for r in records] == [
        (RecordKind.RECEIVED, message.message_id),
        (RecordKind.SENT, message.message_id),
    ]
    archive.close()


def test_batches_too_long_for_one_statement_go_in_one_transaction_of_several(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aun_runtime.storage import _archive_sql

    monkeypatch.setattr(_archive_sql, "MAX_STATEMENT_CHARS", 2000)  # a few messages per statement
    archive = Archive(tmp_path / "a.sqlite", batch_size=2)
    messages = [_message(n) for n in range(40)]
    writer = archive._writer
    statements: list[str] = []
    writer._db.db.set_trace_callback(statements.append)
    with writer._lock:  # hold the writer, so that the batches wait and are taken together
        for message in messages:
            archive.record("a.local", RecordKind.SENT, message)
            archive.record("b.local", RecordKind.RECEIVED, message)
        archive._hand_over()
    archive.flush()
    inserts = [s for s in statements if s.startswith("INSERT INTO archive_batch")]
    assert writer.transactions < len(inserts)  # batches taken together, several statements each
    assert len([s for s in statements if s.startswith("BEGIN")]) == statements.count("COMMIT") >= 1
    received = archive.history("b.local", limit=100)
    assert [r.message.message_id for r in received if r.message] == [m.message_id for m in messages]
    assert archive.count() == 80
    archive.close()
