"""The archive's writer thread: SQLite inserts off the event loop.

The sqlite3 module releases the GIL while SQLite works, so a dedicated thread lets B-tree inserts and
I/O for one batch run on another core while the event loop goes on delivering the next messages.
The loop thread only hands over a list of rows; they are inserted here.

A batch goes in as one multi-row ``INSERT`` (one statement, its own transaction), not with
``executemany``: executemany releases and re-takes the GIL around every row, and while the event
loop is busy each re-take waits for Python's switch interval (5 ms), so the writer crawled and the
loop ended up waiting for it. One statement is bound in one go and then runs entirely outside the GIL.

Batches wait in a bounded queue. If the disk cannot keep up, the loop thread blocks when it hands
over the next batch: memory stays bounded, and a slow disk slows the runtime down rather than
silently losing records. A write error is kept and raised to the loop thread at its next flush,
with the failed batch put back so that nothing recorded is dropped.
"""

from __future__ import annotations

import itertools
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["MAX_QUEUED_BATCHES", "ArchiveWriteError", "ArchiveWriter"]

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


class ArchiveWriteError(RuntimeError):
    """Writing to the archive failed; the records are kept and will be written at the next flush."""


class ArchiveWriter:
    """Owns the SQLite connection: inserts batches in a thread, runs reads under the same lock."""

    def __init__(self, db: sqlite3.Connection, insert_sql: str) -> None:
        self._db = db
        head, _, values = insert_sql.partition(" VALUES ")
        self._insert_head = head + " VALUES "
        self._insert_values = values
        self._columns = values.count("?")
        self._rows_per_statement = max(
            1, min(MAX_ROWS_PER_STATEMENT, db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // self._columns)
        )
        self._statements: dict[int, str] = {}
        self._lock = threading.Lock()  # one statement at a time on the shared connection
        self._queue: queue.Queue[Batch | None] = queue.Queue(MAX_QUEUED_BATCHES)
        self._failed: list[Batch] = []
        self._error: BaseException | None = None
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

    def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``query`` on the connection once everything submitted is written."""
        self.wait()
        with self._lock:
            return query(self._db)

    def close(self) -> None:
        """Write what is queued, stop the thread, close the connection."""
        self.wait()
        self._queue.put(None)
        self._thread.join()
        self._db.close()

    def _insert_rows(self, rows: list[tuple[object, ...]]) -> None:
        chunks = self._chunks(len(rows))
        if len(chunks) == 1:  # one statement: atomic on its own, no BEGIN/COMMIT round trips
            self._db.execute(self._statement(len(rows)), list(itertools.chain.from_iterable(rows)))
            return
        self._db.execute("BEGIN")
        try:
            start = 0
            for size in chunks:
                chunk = rows[start : start + size]
                self._db.execute(self._statement(size), list(itertools.chain.from_iterable(chunk)))
                start += size
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _chunks(self, count: int) -> list[int]:
        """Statement sizes for ``count`` rows: full statements, then powers of two.

        The sqlite3 module keeps every prepared statement it saw (up to 128), and a statement for
        hundreds of rows is large; batches flushed by the timer come in every size, so without this
        the cache filled with a hundred different ones and memory grew by tens of megabytes.
        """
        step = self._rows_per_statement
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
            sql = self._insert_head + ",".join([self._insert_values] * count)
            self._statements[count] = sql
        return sql

    def _run(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                self._queue.task_done()
                return
            # Whatever else is waiting goes in the same transaction: the thread needs the GIL a
            # few times per write, and each time it may wait out the switch interval while the
            # event loop runs, so writing more per wake-up is what lets it keep up.
            taken = [batch]
            closing = False
            while len(taken) < MAX_BATCHES_PER_WRITE:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    closing = True
                    break
                taken.append(more)
            try:
                rows = [row for each in taken for row in each]
                with self._lock:
                    self._insert_rows(rows)
                self.transactions += 1
            except Exception as exc:
                logger.error("archive write failed; the batch is kept for the next flush", exc_info=exc)
                self._failed.extend(taken)
                self._error = exc
            finally:
                for _ in taken:
                    self._queue.task_done()
            if closing:
                self._queue.task_done()
                return
