"""The archive's writer thread: inserts off the event loop.

The sqlite3 module releases the GIL while SQLite works, so a dedicated thread lets B-tree inserts and
I/O for one batch run on another core while the event loop goes on delivering the next messages.
On PostgreSQL the thread waits for the server instead (see `aun_runtime.storage._postgres`).
The loop thread only hands over a list; the batch writer turns it into rows here.

What keeps the thread from falling behind a busy event loop is needing the GIL rarely: every time
it gives the GIL up (around each SQLite call) and wants it back, it may wait out Python's switch
interval (5 ms) while the loop runs. So the batch writer writes a batch with one statement (see
`Archive`), and when several batches are waiting, the thread takes
them all (up to `MAX_BATCHES_PER_WRITE`) into one transaction.

Batches wait in a bounded queue. If the disk cannot keep up, the loop thread blocks when it hands
over the next batch: memory stays bounded, and a slow disk slows the runtime down rather than
silently losing records. A write error is kept and raised to the loop thread at its next flush,
with the failed batches put back so that nothing recorded is dropped.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from protocols.errors import AUNError

from ..base._errors import StorageSessionLostError
from ._protocol import Storage

__all__ = ["MAX_QUEUED_BATCHES", "ArchiveWriteError", "ArchiveWriter"]

logger = logging.getLogger("aun_runtime")

#: Batches that may wait for the writer. With 512-record batches that is 32k records: a long burst,
#: after which the event loop waits for the disk instead of growing memory without bound.
MAX_QUEUED_BATCHES = 64
#: Batches written in one transaction when several are waiting (the writer fell behind a burst).
MAX_BATCHES_PER_WRITE = 16

T = TypeVar("T")
Batch = Any
#: Writes batches, atomically: all of them in one transaction, or nothing (then it raises). It runs
#: in the writer thread on a connection in autocommit mode, where a single statement is a transaction.
BatchWriter = Callable[[Storage, Sequence[Batch]], None]


class ArchiveWriteError(AUNError, RuntimeError):
    """Writing to the archive failed; the records are kept and will be written at the next flush.

    An `AUNError`, as every error the runtime raises; still a `RuntimeError`, as it was first.
    """


class _Barrier:
    """A marker in the batch queue: resolved when every batch queued before it has been handled."""

    __slots__ = ("failures", "future")

    def __init__(self, failures: int) -> None:
        self.failures = failures  # the writer's failure count when the barrier was queued
        self.future: concurrent.futures.Future[None] = concurrent.futures.Future()


class ArchiveWriter:
    """Owns the archive's storage: inserts batches in a thread, runs reads under the same lock."""

    def __init__(self, db: Storage, write_batches: BatchWriter) -> None:
        self._db = db
        self._write_batches = write_batches
        self._lock = threading.Lock()  # one statement at a time on the shared connection
        self._queue: queue.Queue[Batch | _Barrier | None] = queue.Queue(MAX_QUEUED_BATCHES)
        self._failed: list[Batch] = []
        self._error: BaseException | None = None
        self._said_lost = False  # whether the loss of the database session has been logged
        self._failures = 0  # batches that failed to commit, ever
        self.transactions = 0
        self._thread = threading.Thread(target=self._run, name="aun-archive-writer", daemon=True)
        self._thread.start()

    @property
    def storage(self) -> Storage:
        """The database session the writer owns (for a caller that shares it, under its own lock)."""
        return self._db

    def submit(self, batch: Batch) -> None:
        """Queue a batch for writing (blocks only if `MAX_QUEUED_BATCHES` are waiting)."""
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
        [`ArchiveWriteError`][aun_runtime.ArchiveWriteError] if a write failed (the error stays to be reported by [`wait`][aun_runtime.gateway.GatewayEvents.wait]).

        Unlike [`wait`][aun_runtime.gateway.GatewayEvents.wait], it blocks nobody, and it waits for *these* batches only, not for batches
        submitted after it: a caller on the event loop awaits it (`asyncio.wrap_future`).
        """
        if self._failed:  # batches that failed before are tried again, as at a flush
            failed, self._failed = self._failed, []
            for batch in failed:
                self._queue.put(batch)
        marker = _Barrier(self._failures)
        self._queue.put(marker)
        return marker.future

    def read(self, query: Callable[[Storage], T]) -> T:
        """Run `query` on the connection once everything submitted is written."""
        self.wait()
        with self._lock:
            return query(self._db)

    def read_committed(self, query: Callable[[Storage], T]) -> T:
        """Run `query` on what is committed now, without waiting for queued batches.

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
                self._write_batches(self._db, taken)
            self.transactions += 1
        except Exception as exc:
            if not isinstance(exc, StorageSessionLostError):
                logger.error("archive write failed; the batch is kept for the next flush", exc_info=exc)
            elif not self._said_lost:  # the environment failed, not the code: said once, in a line
                self._said_lost = True
                logger.error("archive write failed; the batch is kept for the next flush: %s", exc)
            self._failed.extend(taken)
            self._error = exc
            self._failures += 1
        finally:
            for _ in taken:
                self._queue.task_done()

    def _settle(self, barrier: _Barrier) -> None:
        # A waiter that went away (its task cancelled: a bridge stopping mid-delivery) cancelled the
        # future; there is nobody to tell, and the writer goes on. Were it to raise here, this thread
        # would end, and every flush after it would wait forever for a write that never comes.
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            if self._failures == barrier.failures:
                barrier.future.set_result(None)
            else:
                barrier.future.set_exception(ArchiveWriteError(f"writing the archive failed: {self._error}"))
        self._queue.task_done()
