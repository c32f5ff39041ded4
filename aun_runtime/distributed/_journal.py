"""The worker's journal: its archive, plus the delivery state, written in the same transactions.

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

In a PostgreSQL archive (the database of several machines) each table has a `worker` column
first, since the database holds every worker's journal, and one more table says who the workers are:

```text
aun_workers(worker TEXT PRIMARY KEY, lock BIGINT, secret TEXT)  -- proof-of-life lock id, secret
aun_leases(worker TEXT PRIMARY KEY, until TIMESTAMPTZ)          -- renewed by the worker's event loop
```

Each database's definition of these tables, and the statements of the worker's lock and lease,
are in its dialect (`aun_runtime.storage`: `JournalSQL` and `SessionLocks`).

There, a journal holds a session-level advisory lock `(LIVE_LOCK_CLASS, lock)` on its own session
for as long as the worker runs: it is the worker's proof of life (the server lets go of it when the
session ends: the process died, or the server found it cut off), and it fences the worker: every
commit runs on that session, so once the lock may be someone else's, nothing more of this
worker's is committed, and a commit that carries service handlings checks in its own transaction
that the lock is still this session's.

A delivery to a service AID (one that several workers hold, see `._service_store`) is
journaled as the single row `(origin, aid, seq)` instead of a stream position, since this worker
may see only part of the stream: another instance that finds the delivery claimed by this worker
after it died reads that row to know whether the handling was committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base._errors import AgentRegistrationError, FencedError
from ..storage import Storage, dialect_for
from ..storage._archive import Archive, MessageRow, PendingRecord, create_tables
from ._checkpoint import SAFETY_PAGES, Checkpointer

__all__ = [
    "DELIVERY", "IDLE_COMMIT_GAP", "LEASE", "LEASE_RENEWAL", "LIVE_LOCK_CLASS", "Commit", "Delivery", "JournalArchive",
]

#: The first key of every worker's proof-of-life advisory lock (the second is its `aun_workers.lock`):
#: an arbitrary constant that keeps these locks apart from any other use of advisory locks.
LIVE_LOCK_CLASS = 0x41554E
#: Seconds a starting worker waits for its own lock: another instance holds it for a moment while
#: it settles this worker's claims (a takeover is one transaction); past it, the worker runs elsewhere.
LIVE_LOCK_WAIT = 10.0
#: Seconds a worker's lease runs from its last renewal (by the server's clock). A worker's own event
#: loop renews it every `LEASE_RENEWAL` seconds; one that has not for this long (frozen, its loop
#: blocked) is treated as dead by the instances that find its claims, even though its session,
#: answered by its kernel, lives on: they end that session, which fences it (see `._service_liveness`).
LEASE = 5.0
#: Seconds between two renewals of the lease: four may be missed before it runs out.
LEASE_RENEWAL = 1.0

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

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        commit_interval: float = DEFAULT_COMMIT_INTERVAL,
        worker: str | None = None,
    ):
        if dialect_for(path).shared and not worker:
            raise ValueError(
                "a worker whose journal is in PostgreSQL needs a name (--name): the database holds many workers' journals"
            )
        super().__init__(path, flush_interval=commit_interval)
        dialect = self.storage.dialect
        self._worker_arg = worker if dialect.shared else None
        self._scope = dialect.scoped("worker", worker or "")
        self._writer.read(lambda db: create_tables(db, dialect.journal_tables, dialect.journal_tables))
        self.durable = self.path != ":memory:"
        #: A shared database: this worker's proof-of-life lock id and secret, kept in `aun_workers`.
        self.live_lock: int | None = None
        self._secret: str | None = None
        if self._worker_arg is not None:
            try:
                self._writer.read(self._take_live_lock)
            except BaseException:
                self._closed = True
                self._writer.close()  # the session goes, and nothing of this journal is left running
                raise
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
        by_writer = self.durable and self._writer.read(lambda db: dialect.checkpoints_by_writer(db, SAFETY_PAGES))
        self._checkpointer = Checkpointer(self.path) if by_writer else None

    @property
    def storage(self) -> Storage:
        """The journal's database session (a service ledger in the same database shares it)."""
        return self._writer.storage

    def _take_live_lock(self, db: Storage) -> None:
        assert self._worker_arg is not None
        try:
            claim = db.dialect.claim_worker(db, self._worker_arg, LIVE_LOCK_CLASS, LIVE_LOCK_WAIT)
        except TimeoutError:
            raise AgentRegistrationError(
                f"worker {self._worker_arg} already runs in another process: its database session holds"
                f" the worker's lock in {self.shown}"
            ) from None
        if claim is None:
            return
        self.live_lock, self._secret = claim
        db.dialect.renew_lease(db, self._worker_arg, LEASE)
        db.watch()  # a worker cut off from the server learns it even while it commits nothing

    def renew_lease(self) -> None:
        """A shared database: extend this worker's lease by `LEASE` seconds from now. Called by the worker's
        own event loop, so that a worker whose loop stands still stops renewing it.

        Raises:
            StorageSessionLostError: the session has ended (the worker is fenced).
        """
        worker = self._worker_arg
        if self.live_lock is not None and worker is not None:
            self._writer.read(lambda db: db.dialect.renew_lease(db, worker, LEASE))

    def secret(self) -> str | None:
        """A shared database: the worker's secret, kept there (None: it is a file beside an SQLite archive)."""
        return self._secret

    def check_alive(self, db: Storage) -> None:
        """Inside a transaction on this journal's session: raise unless it still holds the worker's lock.

        Raises:
            FencedError: the lock is not this session's (a commit now could handle a delivery twice).
        """
        if self.live_lock is None:
            return
        if not db.dialect.holds_lock(db, (LIVE_LOCK_CLASS, self.live_lock)):
            raise FencedError(f"worker {self._worker_arg} no longer holds its lock in {self.shown}: nothing is committed")

    def close(self) -> None:
        super().close()
        if self._checkpointer is not None:
            self._checkpointer.close()

    # -- identity ----------------------------------------------------------------------------------

    def worker_name(self) -> str:
        """The worker's name, made once and kept in the file: a restarted worker is the same worker."""

        if self._worker_arg is not None:
            return self._worker_arg  # a shared database: the name was given

        def read_or_make(db: Storage) -> str:
            rows = db.fetch("SELECT value FROM aun_meta WHERE key = 'worker'")
            if rows:
                return str(rows[0][0])
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
        sql = self._scope.sql("SELECT 1 FROM aun_in_handled WHERE {where}origin = ? AND aid = ? AND seq = ?")
        return bool(self._writer.read(lambda db: db.fetch(sql, (*self._scope.args, origin, aid, seq))))

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
        if self._pending_agents:
            self._write_agents()  # registrations first, as the archive writes them (in their own transaction)
        if not (self._pending or self._outbox_rows or self._outbox_done or self._handled or self._service_handled):
            return
        self._last_commit = time.monotonic()
        messages, self._pending_messages = self._pending_messages, []
        pending, self._pending = self._pending, []

        def write(db: Storage) -> None:
            with db.transaction():
                if self._service_handled:
                    self.check_alive(db)  # the fence: no handling committed once the lock may be another's
                self._write_extra(db)
                if pending:  # last: on PostgreSQL it takes the lock that orders the archive's records
                    self.write_batch(db, messages, pending)

        try:
            self._writer.read(write)
        except BaseException:
            self._pending[:0] = pending  # kept for the next attempt; nothing was sent for it
            self._pending_messages[:0] = messages
            raise
        self._committed()

    def _write_extra(self, db: Storage) -> None:
        scope = self._scope
        if self._outbox_rows:
            db.executemany(
                scope.sql(
                    "INSERT INTO aun_outbox ({cols}aid, seq, event) VALUES ({vals}?, ?, ?)"
                    " ON CONFLICT ({cols}aid, seq) DO UPDATE SET event = excluded.event"
                ),
                scope.rows(self._outbox_rows),
            )
            db.executemany(
                scope.sql(
                    "INSERT INTO aun_out_streams ({cols}aid, last_seq) VALUES ({vals}?, ?)"
                    " ON CONFLICT ({cols}aid) DO UPDATE SET last_seq = excluded.last_seq"
                ),
                scope.rows(list(self._out_streams.items())),
            )
        if self._outbox_done:
            db.executemany(
                scope.sql("DELETE FROM aun_outbox WHERE {where}aid = ? AND seq <= ?"),
                scope.rows(list(self._outbox_done.items())),
            )
        if self._handled:
            db.executemany(
                scope.sql(
                    "INSERT INTO aun_in_streams ({cols}origin, aid, through) VALUES ({vals}?, ?, ?)"
                    " ON CONFLICT ({cols}origin, aid) DO UPDATE SET through = excluded.through"
                ),
                scope.rows([(origin, aid, through) for (origin, aid), through in self._handled.items()]),
            )
        if self._service_handled:
            db.executemany(
                scope.sql(
                    "INSERT INTO aun_in_handled ({cols}origin, aid, seq) VALUES ({vals}?, ?, ?) ON CONFLICT DO NOTHING"
                ),
                scope.rows(self._service_handled),
            )
        if self._service_forget:
            db.executemany(
                scope.sql("DELETE FROM aun_in_handled WHERE {where}origin = ? AND aid = ? AND seq <= ?"),
                scope.rows([(origin, aid, through) for (origin, aid), through in self._service_forget.items()]),
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
        sql = self._scope.sql("SELECT aid, seq, event FROM aun_outbox WHERE {where}1 = 1 ORDER BY aid, seq")
        rows = self._writer.read(lambda db: db.fetch(sql, self._scope.args))
        return [(str(a), int(n), bytes(e)) for a, n, e in rows]

    def load_out_streams(self) -> dict[str, int]:
        sql = self._scope.sql("SELECT aid, last_seq FROM aun_out_streams WHERE {where}1 = 1")
        rows = self._writer.read(lambda db: db.fetch(sql, self._scope.args))
        return {str(a): int(n) for a, n in rows}

    def load_in_streams(self) -> dict[tuple[str, str], int]:
        sql = self._scope.sql("SELECT origin, aid, through FROM aun_in_streams WHERE {where}1 = 1")
        rows = self._writer.read(lambda db: db.fetch(sql, self._scope.args))
        return {(str(o), str(a)): int(n) for o, a, n in rows}
