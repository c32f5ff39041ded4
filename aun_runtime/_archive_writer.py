"""The archive's writer thread: SQLite inserts off the event loop.

The sqlite3 module releases the GIL while SQLite works, so a dedicated thread lets B-tree inserts and
I/O for one batch run on another core while the event loop goes on delivering the next messages.
The loop thread only hands over a list; the batch writer turns it into rows here.

Two things keep the thread from falling behind a busy event loop. Every time it needs the GIL it may
wait out Python's switch interval (5 ms) while the loop runs, so it should need it rarely:

* rows go in with :class:`RowInserter`'s multi-row ``INSERT`` statements, not ``executemany``,
  which releases and re-takes the GIL around every row (the writer crawled, and the loop ended up
  waiting for it); one statement is bound in one go and then runs entirely outside the GIL;
* when several batches are waiting, the thread takes them all (up to :data:`MAX_BATCHES_PER_WRITE`)
  into one transaction.

Batches wait in a bounded queue. If the disk cannot keep up, the loop thread blocks when it hands
over the next batch: memory stays bounded, and a slow disk slows the runtime down rather than
silently losing records. A write error is kept and raised to the loop thread at its next flush,
with the failed batches put back so that nothing recorded is dropped.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["MAX_QUEUED_BATCHES", "ArchiveWriteError", "ArchiveWriter", "RowInserter"]

logger = logging.getLogger("aun_runtime")

#: Batches that may wait for the writer. With 512-record batches that is 32k records: a long burst,
#: after which the event loop waits for the disk instead of growing memory without bound.
MAX_QUEUED_BATCHES = 64
#: Batches written in one transaction when several are waiting (the writer fell behind a burst).
MAX_BATCHES_PER_WRITE = 16
#: Rows per INSERT statement at most (bounded further by SQLite's limit on bound variables).
#: Full statements are prepared once and reused; the rest of a write goes in power-of-two
#: statements, so that only a dozen statement sizes are ever prepared.
MAX_ROWS_PER_STATEMENT = 2048

T = TypeVar("T")
Batch = Sequence[Any]
BatchWriter = Callable[[sqlite3.Connection, Batch], None]


class ArchiveWriteError(RuntimeError):
    """Writing to the archive failed; the records are kept and will be written at the next flush."""


class RowInserter:
    """Inserts rows into one table with multi-row ``INSERT`` statements.

    Args:
        insert_sql: ``INSERT INTO t (a, b) VALUES (?, ?)`` for one row.
    """

    def __init__(self, insert_sql: str) -> None:
        head, _, values = insert_sql.partition(" VALUES ")
        self._head = head + " VALUES "
        self._values = values
        self._columns = values.count("?")
        self._statements: dict[int, str] = {}

    def insert(self, db: sqlite3.Connection, rows: Sequence[tuple[object, ...]]) -> None:
        """Insert ``rows`` (inside the caller's transaction)."""
        start = 0
        for size in self._chunks(db, len(rows)):
            chunk = rows[start : start + size]
            db.execute(self._statement(size), list(itertools.chain.from_iterable(chunk)))
            start += size

    def _chunks(self, db: sqlite3.Connection, count: int) -> list[int]:
        """Statement sizes for ``count`` rows: full statements, then powers of two.

        The sqlite3 module keeps every prepared statement it saw (up to 128), and a statement for
        hundreds of rows is large; batches flushed by the timer come in every size, so one statement
        per size filled that cache and memory grew by tens of megabytes under a flood.
        """
        limit = db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // self._columns
        step = max(1, min(MAX_ROWS_PER_STATEMENT, 1 << (limit.bit_length() - 1)))
        sizes = [step] * (count // step)
        rest = count % step
        while rest:
            size = 1 << (rest.bit_length() - 1)
            sizes.append(size)
            rest -= size
        return sizes

    def _statement(self, count: int) -> str:
        sql = self._statements.get(count)
        if sql is None:
            sql = self._head + ",".join([self._values] * count)
            self._statements[count] = sql
        return sql

    @property
    def statement_sizes(self) -> list[int]:
        """The row counts of the statements prepared so far."""
        return sorted(self._statements)


class _Barrier:
    """A marker in the batch queue: resolved when every batch queued before it has been handled."""

    __slots__ = ("failures", "future")

    def __init__(self, failures: int) -> None:
        self.failures = failures  # the writer's failure count when the barrier was queued
        self.future: concurrent.futures.Future[None] = concurrent.futures.Future()


class ArchiveWriter:
    """Owns the SQLite connection: inserts batches in a thread, runs reads under the same lock."""

    def __init__(self, db: sqlite3.Connection, write_batch: BatchWriter) -> None:
        self._db = db
        self._write_batch = write_batch
        self._lock = threading.Lock()  # one statement at a time on the shared connection
        self._queue: queue.Queue[Batch | _Barrier | None] = queue.Queue(MAX_QUEUED_BATCHES)
        self._failed: list[Batch] = []
        self._error: BaseException | None = None
        self._failures = 0  # batches that failed to commit, ever
        self.transactions = 0
        self._thread = threading.Thread(target=self._run, name="aun-archive-writer", daemon=True)
        self._thread.start()

    def submit(self, batch: Batch) -> None:
        """Queue a batch for writing (blocks only if :data:`MAX_QUEUED_BATCHES` are waiting)."""
        self._queue.put(batch)

    def wait(self) -> None:
        """Block until everything submitted is committed; raise a write error if one happened.

        Batches that failed are tried again at the next call after their error was reported.
        """
        if self._error is None and self._failed:
            failed, self._failed = self._failed, []
            for batch in failed:
                self._queue.put(batch)
        self._queue.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise ArchiveWriteError(f"writing the archive failed: {error}") from error

    def barrier(self) -> concurrent.futures.Future[None]:
        """A future that resolves once everything submitted so far is committed, or fails with
        :class:`ArchiveWriteError` if a write failed (the error stays to be reported by :meth:`wait`).

        Unlike :meth:`wait`, it blocks nobody, and it waits for *these* batches only, not for batches
        submitted after it: a caller on the event loop awaits it (``asyncio.wrap_future``).
        """
        if self._failed:  # batches that failed before are tried again, as at a flush
            failed, self._failed = self._failed, []
            for batch in failed:
                self._queue.put(batch)
        marker = _Barrier(self._failures)
        self._queue.put(marker)
        return marker.future

    def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``query`` on the connection once everything submitted is written."""
        self.wait()
        with self._lock:
            return query(self._db)

    def read_committed(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``query`` on what is committed now, without waiting for queued batches.

        For a reader that polls anyway (a console): it never makes the event loop wait for the disk.
        """
        with self._lock:
            return query(self._db)

    def close(self) -> None:
        """Write what is queued, stop the thread, close the connection."""
        self.wait()
        self._queue.put(None)
        self._thread.join()
        self._db.close()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                self._queue.task_done()
                return
            if isinstance(item, _Barrier):
                self._settle(item)
                continue
            taken = [item]
            marker: _Barrier | None = None  # a barrier met while gathering: settled after the write
            closing = False
            while len(taken) < MAX_BATCHES_PER_WRITE:  # whatever else waits goes in the same transaction
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    closing = True
                    break
                if isinstance(more, _Barrier):
                    marker = more
                    break
                taken.append(more)
            self._write(taken)
            if marker is not None:
                self._settle(marker)
            if closing:
                self._queue.task_done()
                return

    def _write(self, taken: list[Batch]) -> None:
        try:
            with self._lock:
                self._db.execute("BEGIN")
                try:
                    # One call for all of them: the batch writer undoes its own bookkeeping when
                    # a write fails, so it must see the whole transaction.
                    self._write_batch(self._db, taken[0] if len(taken) == 1 else [i for b in taken for i in b])
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            self.transactions += 1
        except Exception as exc:
            logger.error("archive write failed; the batch is kept for the next flush", exc_info=exc)
            self._failed.extend(taken)
            self._error = exc
            self._failures += 1
        finally:
            for _ in taken:
                self._queue.task_done()

    def _settle(self, barrier: _Barrier) -> None:
        if self._failures == barrier.failures:
            barrier.future.set_result(None)
        else:
            barrier.future.set_exception(ArchiveWriteError(f"writing the archive failed: {self._error}"))
        self._queue.task_done()
