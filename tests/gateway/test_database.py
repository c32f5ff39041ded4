"""The gateway database: group commit, savepoints, and checkpoints kept off the event loop."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from aun_runtime.gateway._database import Database


async def test_concurrent_writers_share_one_commit(tmp_path: Path) -> None:
    db = Database(tmp_path / "g.sqlite3")
    commits = 0
    original = db._commit_now

    def counting() -> None:
        nonlocal commits
        commits += 1
        original()

    db._commit_now = counting  # type: ignore[method-assign]

    async def writer(n: int) -> None:
        with db.atomic():
            db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (f"k{n}", "v"))
        await db.commit()

    await asyncio.gather(*(writer(n) for n in range(20)))
    assert commits == 1
    other = sqlite3.connect(tmp_path / "g.sqlite3")  # committed: another connection sees all 20
    assert other.execute("SELECT COUNT(*) FROM meta WHERE key LIKE 'k%'").fetchone()[0] == 20
    other.close()
    db.close()


async def test_a_failed_operation_leaves_nothing_behind(tmp_path: Path) -> None:
    db = Database(tmp_path / "g.sqlite3")
    with pytest.raises(RuntimeError), db.atomic():
        db.execute("INSERT INTO meta (key, value) VALUES ('half', 'done')")
        raise RuntimeError("validation failed after the first write")
    with db.atomic():
        db.execute("INSERT INTO meta (key, value) VALUES ('whole', 'done')")
    await db.commit()
    keys = {key for (key,) in db.rows("SELECT key FROM meta")}
    assert "whole" in keys and "half" not in keys
    db.close()


def test_checkpoints_run_in_their_own_thread_and_close_truncates_the_wal(tmp_path: Path) -> None:
    path = tmp_path / "g.sqlite3"
    db = Database(path)
    assert db.row("PRAGMA wal_autocheckpoint")[0] == 0  # never on the loop
    assert db._checkpointer.is_alive()
    for n in range(200):
        with db.atomic():
            db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (f"k{n}", "v" * 500))
    db.commit_sync()
    assert Path(f"{path}-wal").stat().st_size > 0
    db.close()
    assert not db._checkpointer.is_alive()
    wal = Path(f"{path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    reopened = sqlite3.connect(path)
    assert reopened.execute("SELECT COUNT(*) FROM meta WHERE key LIKE 'k%'").fetchone()[0] == 200
    reopened.close()


def test_a_file_written_before_opens_with_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "g.sqlite3"
    with sqlite3.connect(path) as old:  # a file from an earlier version: fewer tables, rows in them
        old.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        old.execute("INSERT INTO meta VALUES ('schema_version', '1'), ('issuer', 'aun.localhost')")
        old.execute(
            "CREATE TABLE inbox (receiver TEXT NOT NULL, seq INTEGER NOT NULL, sender TEXT NOT NULL,"
            " message_id TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (receiver, seq)) WITHOUT ROWID"
        )
        old.execute("INSERT INTO inbox VALUES ('b.aun.localhost', 1, 'a.aun.localhost', 'm1', '{}')")
    old.close()
    db = Database(path)
    assert db.meta("issuer") == "aun.localhost" and db.meta("schema_version") == "1"
    assert db.rows("SELECT receiver, seq, message_id FROM inbox") == [("b.aun.localhost", 1, "m1")]
    with db.atomic():  # the tables it lacked are made
        db.execute("INSERT INTO group_states (group_id, body) VALUES ('g1', '{}')")
    db.close()
