"""The dialects: what a location names, how an owner's tables are scoped, and the session locks that
prove an owner lives (on a real PostgreSQL server; an SQLite file refuses them by name)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from aun_runtime import StorageUnavailableError
from aun_runtime.storage import POSTGRESQL, SQLITE, dialect_for, open_storage

KEY = (0x5445_5354, 7)


def test_a_location_names_its_database_and_its_dialect_scopes_an_owners_tables(tmp_path: Path) -> None:
    assert dialect_for("postgresql://u@h/db") is POSTGRESQL and dialect_for("postgres://h/db") is POSTGRESQL
    assert dialect_for(tmp_path / "a.sqlite") is SQLITE and dialect_for("a.sqlite") is SQLITE
    template = "SELECT 1 FROM t WHERE {where}seq = ?"
    assert POSTGRESQL.scoped("worker", "w1").sql(template) == "SELECT 1 FROM t WHERE worker = ? AND seq = ?"
    assert SQLITE.scoped("worker", "w1").sql(template) == "SELECT 1 FROM t WHERE seq = ?"
    storage = open_storage(tmp_path / "a.sqlite")
    try:
        assert storage.dialect is SQLITE
        assert storage.dialect.claim_worker(storage, "w1", KEY[0], 0.1) is None  # a file is its worker's own
    finally:
        storage.close()


def test_an_sqlite_file_refuses_session_locks_by_name(tmp_path: Path) -> None:
    storage = open_storage(tmp_path / "a.sqlite")
    try:
        with pytest.raises(StorageUnavailableError, match="no sessions to lock"):
            storage.dialect.try_lock(storage, KEY)
        with pytest.raises(StorageUnavailableError, match="no sessions to lock"):
            storage.dialect.lease_expired(storage, "w1")
    finally:
        storage.close()


def test_a_session_lock_is_one_sessions_and_another_can_end_its_holder(postgres_url: str) -> None:
    lost: list[BaseException] = []
    holder = open_storage(postgres_url, on_lost=lost.append)
    other = open_storage(postgres_url)
    try:
        dialect = holder.dialect
        assert dialect.try_lock(holder, KEY)
        assert dialect.holds_lock(holder, KEY)
        assert not dialect.try_lock(other, KEY) and not dialect.holds_lock(other, KEY)
        with other.transaction():
            assert dialect.end_lock_holders(other, KEY) is None
        deadline = time.monotonic() + 10
        while not dialect.try_lock(other, KEY):  # the holder's end lets go of the lock a moment later
            assert time.monotonic() < deadline, "the holder's session was not ended"
            time.sleep(0.01)
        assert dialect.holds_lock(other, KEY)
        holder.watch()
        deadline = time.monotonic() + 10
        while not lost:
            assert time.monotonic() < deadline, "the ended session was not noticed"
            time.sleep(0.05)
        dialect.unlock(other, KEY)
        assert not dialect.holds_lock(other, KEY)
    finally:
        holder.close()
        other.close()


def test_a_lease_runs_out_unless_renewed(postgres_url: str) -> None:
    storage = open_storage(postgres_url)
    try:
        storage.script(POSTGRESQL.journal_tables)
        dialect = storage.dialect
        assert not dialect.lease_expired(storage, "w1")  # never leased: not judged by a lease
        dialect.renew_lease(storage, "w1", 60)
        assert not dialect.lease_expired(storage, "w1")
        dialect.renew_lease(storage, "w1", 0.05)
        time.sleep(0.2)
        assert dialect.lease_expired(storage, "w1")
        claim = dialect.claim_worker(storage, "w1", KEY[0], 1.0)
        assert claim is not None and dialect.holds_lock(storage, (KEY[0], claim[0]))
        assert dialect.claim_worker(storage, "w1", KEY[0], 1.0) == claim  # the same worker, the same lock
    finally:
        storage.close()
