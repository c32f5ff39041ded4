"""The archive's writer thread: SQLite inserts off the event loop.

The sqlite3 module releases the GIL while SQLite works, so a dedicated thread lets B-tree inserts and
I/O for one batch run on another core while the event loop goes on delivering the next messages.
The loop thread only hands over a list; rows are built and inserted here.

Batches wait in a bounded queue. If the disk cannot keep up, the loop thread blocks when it hands
over the next batch: memory stays bounded, and a slow disk slows the runtime down rather than
silently losing records. A write error is kept and raised to the loop thread at its next flush,
with the failed batch put back so that nothing recorded is dropped.
"""

from __future__ import annotations

import concurrent.futures
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

T = TypeVar("T")
Batch = Sequence[Any]
BatchWriter = Callable[[sqlite3.Connection, Batch], None]


class ArchiveWriteError(RuntimeError):
    """Writing to the archive failed; the records are kept and will be written at the next flush."""


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
        while (batch := self._queue.get()) is not None:
            if isinstance(batch, _Barrier):
                if self._failures == batch.failures:
                    batch.future.set_result(None)
                else:
                    batch.future.set_exception(ArchiveWriteError(f"writing the archive failed: {self._error}"))
                self._queue.task_done()
                continue
            try:
                with self._lock:
                    self._db.execute("BEGIN")
                    try:
                        self._write_batch(self._db, batch)
                    except BaseException:
                        self._db.execute("ROLLBACK")
                        raise
                    self._db.execute("COMMIT")
                self.transactions += 1
            except Exception as exc:
                logger.error("archive write failed; the batch is kept for the next flush", exc_info=exc)
                self._failed.append(batch)
                self._error = exc
                self._failures += 1
            finally:
                self._queue.task_done()
        self._queue.task_done()
