"""The archive's SQL: its view, its reads and writes, and the batch format its inserts read.

`SQLArchiveStore` is the `ArchiveStore` (`aun_runtime.storage._archive_store`) of an SQL
database. What every database here speaks alike is written once in this module; what one spells
its own way (the tables' types, the one-statement batch insert, how message rows are numbered, the
lock that orders records) is asked of the storage's dialect (`aun_runtime.storage`, its `ArchiveSQL`
members). Apart from the archive's query API and its writing, so that those hold no SQL.

A batch is written by one statement: the JSON of its message rows and of its records, unpacked by
the database (see `encode` for why).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from ._archive_records import AgentRow, MessageRow, PendingRecord
from ._archive_store import RecordFilter
from ._protocol import Dialect, Row, Storage

__all__ = ["ARCHIVE_VIEW", "MAX_STATEMENT_CHARS", "EncodedBatch", "SQLArchiveStore", "archive_tables"]

#: The archive view (records joined with their messages, one row per record), the same in every database.
ARCHIVE_VIEW = """
SELECT r.id, r.owner, r.kind,
       CASE WHEN r.kind = 'thought' THEN NULL ELSE r.reason END AS reason,
       m.message_id, m.from_aid, m.to_aid, m.group_id, m.thread,
       CASE WHEN r.kind = 'thought' THEN r.reason ELSE m.in_reply_to END AS in_reply_to,
       COALESCE(m.body, r.text, '') AS body,
       COALESCE(m.created_at, r.recorded_at) AS created_at,
       r.recorded_at
FROM records r LEFT JOIN messages m ON m.id = r.message;
"""
#: The columns a read selects, as `aun_runtime.storage._archive_queries.parse_record` reads them.
_COLUMNS = "id, owner, kind, reason, body, recorded_at, message_id IS NOT NULL, in_reply_to"
_UPSERT_AGENTS = (
    "INSERT INTO agents (aid, role, mode, description, card, registered_at) VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (aid) DO UPDATE SET role = excluded.role, mode = excluded.mode,"
    " description = excluded.description, card = excluded.card,"
    " registered_at = excluded.registered_at"
)
_SELECT_AFTER = f"SELECT {_COLUMNS} FROM archive WHERE id > ? ORDER BY id LIMIT ?"
_SELECT_AGENTS = "SELECT aid, role, mode, description, card, registered_at FROM agents ORDER BY registered_at"
_SEEN_KEYS = (
    "SELECT from_aid, message_id FROM archive WHERE owner = ? AND kind IN ('received', 'filtered')"
    " ORDER BY id DESC LIMIT ?"
)

#: Characters of JSON one batch statement takes at most when it joins batches. Far under SQLite's
#: limit on a string (a billion bytes), and small enough that joining never holds much memory
#: twice: hundreds of batches of small messages, or a few of messages near the payload bound.
MAX_STATEMENT_CHARS = 32 * 1024 * 1024

#: What the writer thread takes: the JSON of a batch's message rows and of its records.
EncodedBatch = tuple[str, str]
_batch_json = json.JSONEncoder(ensure_ascii=False, check_circular=False, separators=(",", ":")).encode


def archive_tables(dialect: Dialect) -> str:
    """The archive's table definitions as `dialect` spells them (what an opener checks a file against)."""
    return dialect.archive_tables(ARCHIVE_VIEW)


class SQLArchiveStore:
    """The archive's tables in the database `dialect` speaks for.

    Args:
        dialect: what that database spells its own way.
    """

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._tables = archive_tables(dialect)
        self.message_row_block = dialect.archive_row_block

    # -- opening -------------------------------------------------------------------------------------

    def prepare(self, db: Storage, *, read_only: bool) -> int:
        if read_only:
            self._dialect.check_tables(db, self._tables)
            return 0
        self._dialect.create_tables(db, self._tables)
        self._dialect.archive_prepare_writer(db)
        return self._dialect.archive_message_rows(db)

    def new_message_rows(self, db: Storage) -> int:
        return self._dialect.archive_message_rows(db)

    # -- writing -------------------------------------------------------------------------------------

    def encode(self, messages: list[MessageRow], records: list[PendingRecord]) -> EncodedBatch:
        """A batch as the JSON its statement reads.

        Encoding happens on the event loop, in two calls into C (a few microseconds a record),
        because the writer thread must need the GIL as little as possible: whenever it gives the GIL
        up (around every SQLite call) and wants it back, it waits while a busy event loop holds it,
        often for tens of milliseconds, and any Python work it does stretches the same way. A writer
        that only runs one statement per batch keeps up with the loop; one that encoded the batch,
        or bound rows value by value, fell behind it.
        """
        return _batch_json(messages), _batch_json(records)

    def write_batches(self, db: Storage, batches: Sequence[EncodedBatch], now: int) -> None:
        # One transaction for all the batches, written whole or not at all. Where the dialect's
        # batch insert is one statement (SQLite, in autocommit mode), usually that statement is the
        # transaction; batches of large messages that would make one statement too long go in
        # several, inside one transaction. A batch is never split.
        statements = _statements(batches)
        insert = self._dialect.archive_insert_batch
        if self._dialect.archive_batch_alone and len(statements) == 1:
            insert(db, *statements[0], now)
            return
        with db.transaction():
            for messages, records in statements:
                insert(db, messages, records, now)

    def insert_batch(self, db: Storage, batch: EncodedBatch, now: int) -> None:
        self._dialect.archive_insert_batch(db, *batch, now)

    def write_agents(self, db: Storage, rows: Iterable[AgentRow]) -> None:
        with db.transaction():
            db.executemany(_UPSERT_AGENTS, rows)

    def describe_agent(self, db: Storage, aid: str, description: str) -> None:
        db.execute("UPDATE agents SET description = ? WHERE aid = ?", (description, aid))

    # -- reading -------------------------------------------------------------------------------------

    def select(self, db: Storage, which: RecordFilter, limit: int) -> list[Row]:
        where = ["id > ?"]
        args: list[object] = [which.after_id]
        if which.owner is not None:
            where.insert(0, "owner = ?")
            args.insert(0, which.owner)
        if which.group_id is not None:
            where.append("group_id = ?")
            args.append(which.group_id)
        if which.peer is not None:
            where.append("group_id IS NULL AND (from_aid = ? OR to_aid = ?)")
            args += [which.peer, which.peer]
        if which.thread is not None:
            where.append("thread = ?")
            args.append(which.thread)
        if which.kinds is not None:
            where.append(f"kind IN ({', '.join('?' * len(which.kinds))})")
            args.extend(which.kinds)
        sql = f"SELECT {_COLUMNS} FROM archive WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?"
        return db.fetch(sql, [*args, limit])[::-1]

    def select_after(self, db: Storage, after_id: int, limit: int) -> list[Row]:
        return db.fetch(_SELECT_AFTER, (after_id, limit))

    def last_id(self, db: Storage) -> int:
        return int(db.fetch("SELECT MAX(id) FROM records")[0][0] or 0)

    def agents(self, db: Storage) -> list[Row]:
        try:
            return db.fetch(_SELECT_AGENTS)
        except Exception as exc:
            if not self._dialect.is_missing_table(exc):
                raise
            return []  # an archive written before the table existed

    def count(self, db: Storage, owner: str | None, kind: str | None) -> int:
        where, args = ["1 = 1"], []
        if owner is not None:
            where.append("owner = ?")
            args.append(owner)
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        return int(db.fetch(f"SELECT COUNT(*) FROM archive WHERE {' AND '.join(where)}", args)[0][0])

    def seen_keys(self, db: Storage, owner: str, limit: int) -> list[Row]:
        return db.fetch(_SEEN_KEYS, (owner, limit))


def _statements(batches: Sequence[EncodedBatch]) -> list[EncodedBatch]:
    """The batches joined into as few statements' worth of JSON as `MAX_STATEMENT_CHARS` allows."""
    statements: list[EncodedBatch] = []
    group: list[EncodedBatch] = []
    size = 0
    for batch in batches:
        length = len(batch[0]) + len(batch[1])
        if group and size + length > MAX_STATEMENT_CHARS:
            statements.append(_joined(group))
            group, size = [], 0
        group.append(batch)
        size += length
    statements.append(_joined(group))
    return statements


def _joined(batches: list[EncodedBatch]) -> EncodedBatch:
    if len(batches) == 1:
        return batches[0]
    return _join_json_arrays([batch[0] for batch in batches]), _join_json_arrays([batch[1] for batch in batches])


def _join_json_arrays(arrays: Sequence[str]) -> str:
    """One JSON array of the elements of several (string work only: nothing is parsed)."""
    return "[" + ",".join([array[1:-1] for array in arrays if array != "[]"]) + "]"
