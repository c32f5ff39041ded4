"""What an SQLite commit survives is chosen once, by `AUN_SQLITE_SYNCHRONOUS`, for every SQLite file the
runtime writes: `normal` by default (a crash of the process), `full` on request (a crash of the
machine, a power loss); anything else is refused by name."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from aun_runtime import SQLiteStateStore, StorageUnavailableError
from aun_runtime.distributed._journal import JournalArchive
from aun_runtime.gateway._database import Database
from aun_runtime.network._outbox import Outbox
from aun_runtime.storage import SQLiteStorage
from aun_runtime.storage._sqlite import SQLITE_SYNCHRONOUS_VARIABLE

#: PRAGMA synchronous answers with a number.
NUMBERS = {"normal": 1, "full": 2}


def _storage(path: Path) -> Iterator[sqlite3.Connection]:
    storage = SQLiteStorage(path)
    yield storage.db
    storage.close()


def _journal(path: Path) -> Iterator[sqlite3.Connection]:
    journal = JournalArchive(path)
    yield journal.storage.db  # type: ignore[attr-defined]
    journal.close()


def _states(path: Path) -> Iterator[sqlite3.Connection]:
    store = SQLiteStateStore(path)
    yield store.storage.db  # the store's own connection: what its commits do is the question
    store.close()


def _outbox(path: Path) -> Iterator[sqlite3.Connection]:
    outbox = Outbox(path)
    yield outbox.store.storage.db  # type: ignore[attr-defined]
    outbox.store.close()


def _gateway(path: Path) -> Iterator[sqlite3.Connection]:
    database = Database(path)
    yield database.storage.db
    database.close()


STORES: dict[str, Callable[[Path], Iterator[sqlite3.Connection]]] = {
    "archive": _storage, "journal": _journal, "agent states": _states, "gateway agent's outbox": _outbox,
    "local gateway": _gateway,
}  # fmt: skip


@pytest.mark.parametrize("store", list(STORES))
@pytest.mark.parametrize("chosen", [None, "normal", "full", "FULL"])
def test_every_sqlite_file_commits_as_chosen_in_wal_mode(
    store: str, chosen: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if chosen is None:
        monkeypatch.delenv(SQLITE_SYNCHRONOUS_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(SQLITE_SYNCHRONOUS_VARIABLE, chosen)
    opened = STORES[store](tmp_path / "store.sqlite")
    db = next(opened)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert db.execute("PRAGMA synchronous").fetchone() == (NUMBERS[(chosen or "normal").lower()],)
    next(opened, None)


@pytest.mark.parametrize("store", list(STORES))
def test_another_choice_is_refused_by_name(store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SQLITE_SYNCHRONOUS_VARIABLE, "off")
    with pytest.raises(StorageUnavailableError, match=r"AUN_SQLITE_SYNCHRONOUS='off': say normal .* or full"):
        next(STORES[store](tmp_path / "store.sqlite"))
