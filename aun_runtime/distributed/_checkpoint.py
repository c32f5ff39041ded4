"""WAL checkpoints of a worker's journal, on a thread of their own instead of inside a commit.

The journal commits on the event loop (what waits for a commit must know it happened). SQLite's
automatic checkpoint runs inside the commit that fills the write-ahead log past its limit: every
hundred-odd commits, one of them copies the log into the database file and syncs it, 3-5 ms during
which every message on the worker waits (the largest single cause of the paced p99 of a worker).
So the journal asks this checkpointer, every `CHECKPOINT_EVERY` commits, to run a *passive*
checkpoint on its own connection and thread: passive checkpoints never block the loop's writer, and
SQLite's own automatic checkpoint stays on at `SAFETY_PAGES` as the bound on the log's size should
this thread ever fall behind. Its connection is opened like every SQLite connection of the runtime,
by the storage package's `SQLiteStorage`.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

from ..storage import SQLiteStorage

__all__ = ["CHECKPOINT_EVERY", "SAFETY_PAGES", "Checkpointer"]

logger = logging.getLogger("aun_runtime.distributed")

#: Commits between two checkpoints. SQLite's default (1,000 log pages) came every 100-150 commits.
CHECKPOINT_EVERY = 64
#: Log pages after which a commit checkpoints by itself, as SQLite does: only if this thread lags.
SAFETY_PAGES = 20_000


class Checkpointer:
    """Runs passive checkpoints of one SQLite file on a daemon thread, when asked.

    Args:
        path: the database file (in WAL mode).
        every: commits between two checkpoints.
    """

    def __init__(self, path: str, *, every: int = CHECKPOINT_EVERY) -> None:
        self._path = path
        self._every = every
        self._commits = 0
        self._wake = threading.Event()
        self._stopping = False
        self.checkpoints = 0
        self._thread = threading.Thread(target=self._run, name="aun-journal-checkpoint", daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """One more commit; every `every` commits, a checkpoint is started (not waited for)."""
        self._commits += 1
        if self._commits >= self._every:
            self._commits = 0
            self._wake.set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        """Stop the thread once a checkpoint under way is done. Idempotent."""
        self._stopping = True
        self._wake.set()
        self._thread.join()

    def _run(self) -> None:
        db = SQLiteStorage(self._path)
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                try:
                    db.fetch("PRAGMA wal_checkpoint(PASSIVE)")
                    self.checkpoints += 1
                except sqlite3.Error as exc:  # busy, or the file went: the next one tries again
                    logger.debug("journal checkpoint of %s failed: %s", self._path, exc)
        finally:
            db.close()
