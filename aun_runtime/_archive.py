"""The archive: every message an agent sends, receives or is shielded from, in one SQLite file.

Nothing that reaches a runtime is lost: each message is recorded once per agent that it concerns,
with what happened to it. The archive is what lets an agent in a ``mention`` group fold the talk it
was not shown into its next addressed turn, what a console draws, and what a dead letter points to.

Schema (one table, ``archive``)::

    id           INTEGER PRIMARY KEY   -- insertion order, the archive's clock
    owner        TEXT NOT NULL         -- whose view the record belongs to (an AID)
    kind         TEXT NOT NULL         -- sent | received | filtered | thought | dead_letter | loop_stop
    reason       TEXT                  -- why filtered, dead-lettered or stopped
    message_id   TEXT                  -- the message's id (NULL for thoughts)
    from_aid     TEXT                  -- sender
    to_aid       TEXT                  -- recipient of a direct message
    group_id     TEXT                  -- group of a group message
    thread       TEXT                  -- conversation thread
    in_reply_to  TEXT                  -- the message answered (for a thought: the message it is about)
    body         TEXT NOT NULL         -- the message as JSON, or a thought's text
    created_at   INTEGER NOT NULL      -- ms since the epoch: the message's creation (or the record's)
    recorded_at  INTEGER NOT NULL      -- ms since the epoch: when the record was made

    UNIQUE (owner, kind, from_aid, message_id) for kinds sent / received / filtered:
    a message is archived exactly once per agent, even if it is delivered twice.

Writes are batched: records collect in memory and go to SQLite in one transaction when
``batch_size`` records are waiting or ``flush_interval`` seconds after the first one, whichever
comes first, and always before any read and on :meth:`Archive.close`. The file uses WAL mode so
another process (a console) can read while the runtime writes.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from protocols.aun import AUNMessage

__all__ = ["Archive", "ArchiveRecord", "RecordKind"]


class RecordKind(StrEnum):
    """What happened to a message, from its owner's point of view."""

    SENT = "sent"  #: the owner sent it (a publish is never delivered back to its sender)
    RECEIVED = "received"  #: delivered to the owner's handler
    FILTERED = "filtered"  #: shielded by the channel (mention mode): kept, not shown to the agent
    THOUGHT = "thought"  #: the owner's internal reasoning; never sent
    DEAD_LETTER = "dead_letter"  #: could not be delivered or handled; ``reason`` says why
    LOOP_STOP = "loop_stop"  #: the loop guard refused a send that would exceed the hop limit


_SCHEMA = """
CREATE TABLE IF NOT EXISTS archive (
    id INTEGER PRIMARY KEY,
    owner TEXT NOT NULL,
    kind TEXT NOT NULL,
    reason TEXT,
    message_id TEXT,
    from_aid TEXT,
    to_aid TEXT,
    group_id TEXT,
    thread TEXT,
    in_reply_to TEXT,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS archive_owner ON archive(owner, id);
CREATE INDEX IF NOT EXISTS archive_group ON archive(group_id, id);
CREATE INDEX IF NOT EXISTS archive_thread ON archive(thread, id);
CREATE INDEX IF NOT EXISTS archive_kind ON archive(kind, id);
CREATE UNIQUE INDEX IF NOT EXISTS archive_once ON archive(owner, kind, from_aid, message_id)
    WHERE kind IN ('sent', 'received', 'filtered');
"""

_INSERT = (
    "INSERT OR IGNORE INTO archive (owner, kind, reason, message_id, from_aid, to_aid, group_id, thread,"
    " in_reply_to, body, created_at, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_COLUMNS = "id, owner, kind, reason, body, recorded_at, message_id IS NOT NULL, in_reply_to"

#: Records written per transaction. 512 amortises the commit to a few microseconds per record
#: while keeping a burst's worth of records (and their memory) small.
DEFAULT_BATCH_SIZE = 512
#: How long a record may wait in memory before it is written, in seconds.
DEFAULT_FLUSH_INTERVAL = 0.05


@dataclass(frozen=True, slots=True)
class ArchiveRecord:
    """One archived fact: a message as its owner saw it, or a thought, dead letter or loop stop."""

    id: int
    owner: str
    kind: RecordKind
    reason: str | None
    message: AUNMessage | None
    text: str | None
    recorded_at: int
    about: str | None = None  #: for a thought: the id of the message it was about


_Pending = tuple[str, RecordKind, str | None, AUNMessage | None, str | None, int]


class Archive:
    """An append-only SQLite record of everything agents send, receive, think and fail to deliver.

    Args:
        path: the SQLite file (created with its directory if missing), or ``":memory:"``.
        batch_size: records per write transaction.
        flush_interval: seconds a record may wait before it is written.

    Example:
        >>> archive = Archive(":memory:")
        >>> archive.record_thought("coder.local", "the test needs a fixture")
        >>> [r.text for r in archive.history("coder.local")]
        ['the test needs a fixture']
        >>> archive.close()
    """

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._batch_size = batch_size
        self._flush_interval = flush_interval
        self._pending: list[_Pending] = []
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    # -- writing -----------------------------------------------------------------------------------

    def record(self, owner: str, kind: RecordKind, message: AUNMessage, reason: str | None = None) -> None:
        """Record ``message`` in ``owner``'s view."""
        self._add((owner, kind, reason, message, None, 0))

    def record_thought(self, owner: str, text: str, about: str | None = None) -> None:
        """Record an internal thought of ``owner``, optionally about a message (its id). Never sent."""
        self._add((owner, RecordKind.THOUGHT, about, None, text, _now_ms()))

    def record_event(self, owner: str, kind: RecordKind, reason: str, message: AUNMessage | None) -> None:
        """Record a dead letter or loop stop, with or without the message it concerns."""
        self._add((owner, kind, reason, message, None if message else reason, _now_ms()))

    def _add(self, item: _Pending) -> None:
        if self._closed:
            raise RuntimeError("the archive is closed")
        self._pending.append(item)
        if len(self._pending) >= self._batch_size:
            self.flush()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no loop: the next read or close writes it
            self._timer = loop.call_later(self._flush_interval, self.flush)

    def flush(self) -> None:
        """Write every waiting record now, in one transaction."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending and not self._has_extra_writes():
            return
        pending, self._pending = self._pending, []
        now = _now_ms()
        self._db.execute("BEGIN")
        try:
            self._db.executemany(_INSERT, (_row(item, now) for item in pending))
            self._write_extra(self._db)
        except BaseException:
            self._db.execute("ROLLBACK")
            self._pending[:0] = pending
            raise
        self._db.execute("COMMIT")
        self._committed()

    # Hooks for a subclass that keeps more state in the same file and wants it written in the same
    # transaction as the records (the distributed worker's journal). No-ops here.

    def _has_extra_writes(self) -> bool:
        return False

    def _write_extra(self, db: sqlite3.Connection) -> None:
        """Write more rows inside the flush transaction; raising rolls the whole batch back."""

    def _committed(self) -> None:
        """Called after a flush transaction has committed."""

    def close(self) -> None:
        """Write what is waiting and close the file. Idempotent."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._db.close()

    # -- reading -----------------------------------------------------------------------------------

    def history(
        self,
        owner: str,
        *,
        group_id: str | None = None,
        peer: str | None = None,
        thread: str | None = None,
        kinds: Iterable[RecordKind | str] | None = None,
        after_id: int = 0,
        limit: int = 100,
    ) -> list[ArchiveRecord]:
        """``owner``'s records, oldest first: the last ``limit`` of them that match.

        Args:
            owner: whose view.
            group_id: only this group's messages.
            peer: only direct messages exchanged with this AID.
            thread: only this conversation thread.
            kinds: only these kinds (default: all).
            after_id: only records newer than this archive id.
            limit: at most this many (the newest ones).
        """
        where = ["owner = ?", "id > ?"]
        args: list[object] = [owner, after_id]
        if group_id is not None:
            where.append("group_id = ?")
            args.append(group_id)
        if peer is not None:
            where.append("group_id IS NULL AND (from_aid = ? OR to_aid = ?)")
            args += [peer, peer]
        if thread is not None:
            where.append("thread = ?")
            args.append(thread)
        where.append(_kinds_clause(kinds, args))
        return self._select(" AND ".join(where), args, limit)

    def records(
        self, *, kinds: Iterable[RecordKind | str] | None = None, after_id: int = 0, limit: int = 1000
    ) -> list[ArchiveRecord]:
        """All owners' records, oldest first: the last ``limit`` that match."""
        args: list[object] = [after_id]
        clause = "id > ? AND " + _kinds_clause(kinds, args)
        return self._select(clause, args, limit)

    def dead_letters(self, limit: int = 1000) -> list[ArchiveRecord]:
        """Messages that could not be delivered or handled, oldest first."""
        return self.records(kinds=[RecordKind.DEAD_LETTER], limit=limit)

    def count(self, *, owner: str | None = None, kind: RecordKind | str | None = None) -> int:
        """How many records match."""
        self.flush()
        where, args = ["1 = 1"], []
        if owner is not None:
            where.append("owner = ?")
            args.append(owner)
        if kind is not None:
            where.append("kind = ?")
            args.append(str(kind))
        row = self._db.execute(f"SELECT COUNT(*) FROM archive WHERE {' AND '.join(where)}", args).fetchone()
        return int(row[0])

    def seen_keys(self, owner: str, limit: int) -> list[tuple[str, str]]:
        """The newest ``limit`` (sender, message_id) pairs delivered or filtered for ``owner``.

        A channel seeds its duplicate filter with these, so a redelivery after a restart is still
        recognised.
        """
        self.flush()
        rows = self._db.execute(
            "SELECT from_aid, message_id FROM archive WHERE owner = ? AND kind IN ('received', 'filtered')"
            " ORDER BY id DESC LIMIT ?",
            (owner, limit),
        ).fetchall()
        return [(str(a), str(m)) for a, m in reversed(rows)]

    def _select(self, where: str, args: Sequence[object], limit: int) -> list[ArchiveRecord]:
        self.flush()
        sql = f"SELECT {_COLUMNS} FROM archive WHERE {where} ORDER BY id DESC LIMIT ?"
        rows = self._db.execute(sql, [*args, limit]).fetchall()
        return [_record(row) for row in reversed(rows)]


def _kinds_clause(kinds: Iterable[RecordKind | str] | None, args: list[object]) -> str:
    if kinds is None:
        return "1 = 1"
    names = [str(RecordKind(k)) for k in kinds]
    args.extend(names)
    return f"kind IN ({', '.join('?' * len(names))})"


def _row(item: _Pending, now: int) -> tuple[object, ...]:
    owner, kind, reason, message, text, created = item
    if kind is RecordKind.THOUGHT:  # ``reason`` carries the id of the message the thought is about
        return (owner, str(kind), None, None, None, None, None, None, reason, text or "", created, now)
    if message is None:
        return (owner, str(kind), reason, None, None, None, None, None, None, text or "", created or now, now)
    return (
        owner,
        str(kind),
        reason,
        message.message_id,
        message.from_aid,
        message.to,
        message.group_id,
        message.thread,
        message.in_reply_to,
        message.to_json(),
        message.created_at,
        now,
    )


def _record(row: tuple[object, ...]) -> ArchiveRecord:
    record_id, owner, kind, reason, body, recorded_at, is_message, about = row
    text = str(body)
    message = AUNMessage.model_validate_json(text) if is_message else None
    return ArchiveRecord(
        id=int(record_id),  # type: ignore[call-overload]
        owner=str(owner),
        kind=RecordKind(str(kind)),
        reason=None if reason is None else str(reason),
        message=message,
        text=message.text if message else text,
        recorded_at=int(recorded_at),  # type: ignore[call-overload]
        about=None if message or about is None else str(about),
    )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
