"""The worker's journal: its archive file, plus the delivery state, written in the same transactions.

Exactly-once handling over an at-least-once transport needs one rule: what a handler did and the
fact that its message was handled become durable *together*. So, while a delivered message is being
handled, everything it causes (its `received` record, the handler's thoughts, the messages it
sends) is held in a `Delivery` scope instead of the archive's write batch. When the handler
returns, the scope is *sealed*: its records, its outgoing messages (as outbox rows) and the stream
position "handled through seq N" enter the batch together, and one commit writes them all. Only after
that commit do the outgoing messages leave the process and the acknowledgement go back. A worker
killed before the commit left no trace of the handling (the sender still has the message and sends
it again); killed after it, the redelivery is recognised by its stream position and acknowledged,
and the outgoing messages are sent from the outbox.

Tables added to the archive file:

```text
aun_meta(key TEXT PRIMARY KEY, value TEXT)                -- the worker's durable name
aun_outbox(aid TEXT, seq INTEGER, event BLOB)             -- sent, not yet acknowledged
aun_out_streams(aid TEXT PRIMARY KEY, last_seq INTEGER)   -- last number given per recipient
aun_in_streams(origin TEXT, aid TEXT, through INTEGER)    -- handled through, per sender worker
aun_in_handled(origin TEXT, aid TEXT, seq INTEGER)        -- service AIDs: each delivery handled
```

A delivery to a service AID (one that several workers hold, see `._service_store`) is
journaled as the single row `(origin, aid, seq)` instead of a stream position, since this worker
may see only part of the stream: another instance that finds the delivery claimed by this worker
after it died reads that row to know whether the handling was committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._archive import Archive, MessageRow, PendingRecord
from ._checkpoint import SAFETY_PAGES, Checkpointer

__all__ = ["DELIVERY", "IDLE_COMMIT_GAP", "Commit", "Delivery", "JournalArchive"]

_TABLES = """
CREATE TABLE IF NOT EXISTS aun_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS aun_outbox (aid TEXT NOT NULL, seq INTEGER NOT NULL, event BLOB NOT NULL,
    PRIMARY KEY (aid, seq));
CREATE TABLE IF NOT EXISTS aun_out_streams (aid TEXT PRIMARY KEY, last_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS aun_in_streams (origin TEXT NOT NULL, aid TEXT NOT NULL,
    through INTEGER NOT NULL, PRIMARY KEY (origin, aid));
CREATE TABLE IF NOT EXISTS aun_in_handled (origin TEXT NOT NULL, aid TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (origin, aid, seq));
"""

#: While deliveries are being handled, seconds between a change and its commit: a busy worker
#: commits a batch of handlings per transaction (and sends one acknowledgement per sender for it).
#: An idle worker commits at the end of the current burst of work instead, so a lone message
#: never waits for this.
DEFAULT_COMMIT_INTERVAL = 0.01
#: Seconds between two commits that follow the end of the worker's deliveries: a lone delivery is
#: committed at the end of its burst, but a flood, which leaves the receiver idle between one message
#: and the next, is committed in batches at most this often rather than once per message or two.
#: What a worker sends outside any handling (an inbox, a producer) does not wait for it.
IDLE_COMMIT_GAP = 0.002


@dataclass(eq=False)
class Delivery:
    """One inbound message being handled: what it causes is held here until the handler returns."""

    origin: str
    aid: str
    seq: int
    records: list[PendingRecord] = field(default_factory=list)
    messages: list[MessageRow] = field(default_factory=list)  # the rows its records numbered
    sends: list[tuple[str, Any]] = field(default_factory=list)  # (recipient aid, CloudEvent)
    sealed: bool = False
    service: bool = False  # to a service AID: journaled as one handled row, not a stream position


#: The delivery whose handler runs in this task, if any.
DELIVERY: contextvars.ContextVar[Delivery | None] = contextvars.ContextVar("aun_delivery", default=None)


@dataclass
class Commit:
    """What one commit made durable, for the listeners that act on it afterwards."""

    outbox: list[tuple[str, int]] = field(default_factory=list)  # (aid, seq) now durable
    handled: dict[tuple[str, str], int] = field(default_factory=dict)  # (origin, aid) -> through
    service: list[tuple[str, str, int]] = field(default_factory=list)  # (origin, aid, seq) of service AIDs


class JournalArchive(Archive):
    """An [`Archive`][aun_runtime.Archive] that also journals the worker's delivery state in the same file.

    Unlike the plain archive, which hands batches to a writer thread, the journal commits on the
    event loop: what waits for a commit (outgoing messages, acknowledgements) must know it happened.

    Args:
        path: the SQLite file, or `":memory:"` (then nothing survives the process).
        commit_interval: seconds a change may wait for its commit while the worker is busy.
    """

    def __init__(self, path: str | Path = ":memory:", *, commit_interval: float = DEFAULT_COMMIT_INTERVAL):
        super().__init__(path, flush_interval=commit_interval)
        self._writer.read(lambda db: db.executescript(_TABLES))
        self.durable = self.path != ":memory:"
        self._outbox_rows: list[tuple[str, int, bytes]] = []
        self._outbox_done: dict[str, int] = {}
        self._out_streams: dict[str, int] = {}
        self._handled: dict[tuple[str, str], int] = {}
        self._service_handled: list[tuple[str, str, int]] = []
        self._service_forget: dict[tuple[str, str], int] = {}
        self.on_commit: Callable[[Commit], None] | None = None
        #: True while deliveries are being handled (then commits are batched by time).
        self.busy: Callable[[], bool] = lambda: False
        self._last_commit = 0.0  # time.monotonic() of the last commit
        # Checkpoints run beside the loop, not inside one of its commits (see :mod:`._checkpoint`).
        self._checkpointer = Checkpointer(self.path) if self.durable else None
        if self._checkpointer is not None:
            self._writer.read(lambda db: db.execute(f"PRAGMA wal_autocheckpoint={SAFETY_PAGES}"))

    def close(self) -> None:
        super().close()
        if self._checkpointer is not None:
            self._checkpointer.close()

    # -- identity ----------------------------------------------------------------------------------

    def worker_name(self) -> str:
        """The worker's name, made once and kept in the file: a restarted worker is the same worker."""

        def read_or_make(db: sqlite3.Connection) -> str:
            row = db.execute("SELECT value FROM aun_meta WHERE key = 'worker'").fetchone()
            if row is not None:
                return str(row[0])
            name = f"w-{uuid.uuid4().hex[:12]}"
            db.execute("INSERT INTO aun_meta (key, value) VALUES ('worker', ?)", (name,))
            return name

        return self._writer.read(read_or_make)

    # -- delivery scopes ---------------------------------------------------------------------------

    def _add(self, item: PendingRecord) -> None:
        scope = DELIVERY.get()
        if scope is not None and not scope.sealed:
            scope.records.append(item)
            return
        if self._closed:
            raise RuntimeError("the archive is closed")
        self._pending.append(item)
        if len(self._pending) >= self._batch_size:
            self._hand_over()
        else:
            self.request_commit()

    def _add_message(self, row: MessageRow) -> None:
        scope = DELIVERY.get()
        if scope is not None and not scope.sealed:
            scope.messages.append(row)
        else:
            self._pending_messages.append(row)

    def abandon(self, scope: Delivery) -> None:
        """Drop what a delivery recorded: it will not be kept. The message rows its records numbered
        are forgotten, so that a later record of the same message writes its row itself."""
        scope.sealed = True
        self._forget_rows(scope.messages)
        scope.messages.clear()
        scope.records.clear()

    def seal(self, scope: Delivery, position: int | None) -> None:
        """Move a finished delivery's records and its stream's new position into the write batch.

        `position` is how far the stream is now handled without a gap (None: not moved, because
        an earlier delivery was abandoned). The caller adds the delivery's outbox rows first;
        nothing here can start a commit halfway.
        """
        scope.sealed = True
        if self._closed:
            raise RuntimeError("the archive is closed")
        self._pending.extend(scope.records)
        self._pending_messages.extend(scope.messages)
        scope.records.clear()
        scope.messages.clear()
        if scope.service:
            self._service_handled.append((scope.origin, scope.aid, scope.seq))
        elif position is not None:
            self._handled[(scope.origin, scope.aid)] = position
        if len(self._pending) >= self._batch_size:
            self._hand_over()
        else:
            self.request_commit()

    # -- delivery state ----------------------------------------------------------------------------

    def outbox_add(self, aid: str, seq: int, event: bytes) -> None:
        self._outbox_rows.append((aid, seq, event))
        self._out_streams[aid] = seq

    def outbox_done(self, aid: str, through: int) -> None:
        """Acknowledged rows go with the next commit; no hurry (a row kept too long is sent again
        after a crash, and skipped by its receiver)."""
        if through > self._outbox_done.get(aid, 0):
            self._outbox_done[aid] = through

    def forget_service_handled(self, origin: str, aid: str, through: int) -> None:
        """The shared ledger holds `aid`'s stream from `origin` as handled through `through`:
        this worker's own rows for it are no longer needed (they go with the next commit)."""
        key = (origin, aid)
        if through > self._service_forget.get(key, 0):
            self._service_forget[key] = through

    def service_handled(self, origin: str, aid: str, seq: int) -> bool:
        """Whether this worker's journal committed the handling of service delivery `seq`."""
        row = self._writer.read(
            lambda db: db.execute(
                "SELECT 1 FROM aun_in_handled WHERE origin = ? AND aid = ? AND seq = ?", (origin, aid, seq)
            ).fetchone()
        )
        return row is not None

    def request_commit(self) -> None:
        """Commit soon: at the end of this burst of work if idle, within `commit_interval` if busy."""
        if self._timer is None:
            self._commit_in(self._flush_interval if self.busy() else 0.0)

    def commit_soon(self) -> None:
        """The worker's deliveries are all done: commit what waits at the end of this burst rather
        than at the busy timer, but no sooner than `IDLE_COMMIT_GAP` after the last commit (or at
        the busy timer, if that comes first)."""
        if not self.pending_commit:
            return
        delay = max(0.0, self._last_commit + IDLE_COMMIT_GAP - time.monotonic())
        if self._timer is not None:
            if self._timer.when() - asyncio.get_running_loop().time() <= delay:
                return  # already due no later than that
            self._timer.cancel()
            self._timer = None
        self._commit_in(delay)

    def _commit_in(self, delay: float) -> None:
        if not self._closed:
            with contextlib.suppress(RuntimeError):  # no loop: the next flush writes it
                self._timer = asyncio.get_running_loop().call_later(delay, self._hand_over)

    @property
    def pending_commit(self) -> bool:
        """Something waits whose commit others wait for (acknowledged rows do not count)."""
        return bool(self._pending or self._outbox_rows or self._handled or self._service_handled)

    def _hand_over(self) -> None:
        """Commit now, on this thread: records, outbox rows and positions in one transaction."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not (self._pending or self._outbox_rows or self._outbox_done or self._handled or self._service_handled):
            return
        self._last_commit = time.monotonic()
        messages, self._pending_messages = self._pending_messages, []
        pending, self._pending = self._pending, []

        def write(db: sqlite3.Connection) -> None:
            db.execute("BEGIN")
            try:
                if pending:
                    self.write_batch(db, messages, pending)
                self._write_extra(db)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

        try:
            self._writer.read(write)
        except BaseException:
            self._pending[:0] = pending  # kept for the next attempt; nothing was sent for it
            self._pending_messages[:0] = messages
            raise
        self._committed()

    def _write_extra(self, db: sqlite3.Connection) -> None:
        if self._outbox_rows:
            db.executemany("INSERT OR REPLACE INTO aun_outbox (aid, seq, event) VALUES (?, ?, ?)", self._outbox_rows)
            db.executemany(
                "INSERT OR REPLACE INTO aun_out_streams (aid, last_seq) VALUES (?, ?)",
                list(self._out_streams.items()),
            )
        if self._outbox_done:
            db.executemany("DELETE FROM aun_outbox WHERE aid = ? AND seq <= ?", list(self._outbox_done.items()))
        if self._handled:
            db.executemany(
                "INSERT OR REPLACE INTO aun_in_streams (origin, aid, through) VALUES (?, ?, ?)",
                [(origin, aid, through) for (origin, aid), through in self._handled.items()],
            )
        if self._service_handled:
            db.executemany("INSERT OR REPLACE INTO aun_in_handled (origin, aid, seq) VALUES (?, ?, ?)", self._service_handled)
        if self._service_forget:
            db.executemany(
                "DELETE FROM aun_in_handled WHERE origin = ? AND aid = ? AND seq <= ?",
                [(origin, aid, through) for (origin, aid), through in self._service_forget.items()],
            )

    def _committed(self) -> None:
        commit = Commit([(aid, seq) for aid, seq, _ in self._outbox_rows], self._handled, self._service_handled)
        self._service_handled = []
        self._service_forget = {}
        self._outbox_rows = []
        self._outbox_done = {}
        self._out_streams = {}
        self._handled = {}
        if self._checkpointer is not None:
            self._checkpointer.committed()
        if self.on_commit is not None:
            self.on_commit(commit)

    # -- loading after a restart ---------------------------------------------------------------------

    def load_outbox(self) -> list[tuple[str, int, bytes]]:
        rows = self._writer.read(lambda db: db.execute("SELECT aid, seq, event FROM aun_outbox ORDER BY aid, seq").fetchall())
        return [(str(a), int(n), bytes(e)) for a, n, e in rows]

    def load_out_streams(self) -> dict[str, int]:
        rows = self._writer.read(lambda db: db.execute("SELECT aid, last_seq FROM aun_out_streams").fetchall())
        return {str(a): int(n) for a, n in rows}

    def load_in_streams(self) -> dict[tuple[str, str], int]:
        rows = self._writer.read(lambda db: db.execute("SELECT origin, aid, through FROM aun_in_streams").fetchall())
        return {(str(o), str(a)): int(n) for o, a, n in rows}
