"""Where the network outbox keeps its rows: the `OutboxStore` protocol and its SQLite file.

The outbox (`._outbox`) decides *when* rows are written (group commits on a thread of their own,
removals riding on the next commit) and what a failed commit means for its senders; a store only
keeps rows, in one transaction per write. Apart, so that the outbox's rules never meet a database's
spelling: what SQLite spells its own way is in the storage package's SQLite dialect.

Schema (one table, `outbox`, in a file of the gateway agent's own):

```text
outbox
    id           INTEGER PRIMARY KEY  -- the order messages were sent in
    sender       TEXT NOT NULL        -- the local AID that sent it (the identity it leaves with)
    recipient    TEXT                 -- the AID a direct message or a group copy is for;
                                      -- NULL for a message to a network group
    body         TEXT NOT NULL        -- the AUNMessage as JSON
    enqueued_at  INTEGER NOT NULL     -- ms since the epoch
    trace        TEXT                 -- the W3C traceparent it was sent in, when tracing
                                      -- (added to files made before it by ALTER TABLE)
```
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ..base._errors import UndeliverableError
from ..storage import SQLiteStorage

__all__ = ["OutboxRow", "OutboxStore", "OutboxWriteError", "SQLiteOutboxStore", "StoredOutboxRow"]

#: A row as the outbox writes it: (id, sender, recipient, body JSON, enqueued_at ms, trace).
OutboxRow = tuple[int, str, str | None, str, int, str | None]
#: A row as it is read back, oldest first: (id, sender, recipient, body JSON, trace).
StoredOutboxRow = tuple[int, str, str | None, str, str | None]


class OutboxWriteError(UndeliverableError):
    """The outbox could not commit the message (disk full, file removed...); it was not taken."""


class OutboxStore(Protocol):
    """Keeps the outbox's rows. Used from one thread at a time (the outbox's writer)."""

    #: Where the rows are (a file path), for messages.
    location: str

    def waiting(self) -> list[StoredOutboxRow]:
        """Every row kept, oldest first."""
        ...

    def write(self, inserts: Sequence[OutboxRow], removals: Sequence[int]) -> None:
        """Add `inserts` and delete the rows whose ids are `removals`, in one transaction.

        Raises:
            OutboxWriteError: the transaction failed; nothing of it was kept.
        """
        ...

    def close(self) -> None:
        """Let go of the file."""
        ...


class SQLiteOutboxStore:
    """The outbox's rows in an SQLite file (made with its directory if missing).

    Example:
        >>> import tempfile, pathlib
        >>> store = SQLiteOutboxStore(pathlib.Path(tempfile.mkdtemp()) / "outbox.sqlite")
        >>> store.write([(1, "a.local", "b.aun.network", "{}", 0, None)], [])
        >>> store.waiting()
        [(1, 'a.local', 'b.aun.network', '{}', None)]
        >>> store.close()
    """

    def __init__(self, path: str | Path) -> None:
        self.storage = SQLiteStorage(path)
        self.location = self.storage.location
        dialect = self.storage.dialect
        self.storage.script(dialect.outbox_table)
        if "trace" not in dialect.columns(self.storage, "outbox"):
            self.storage.execute("ALTER TABLE outbox ADD COLUMN trace TEXT")  # a file from before it

    def waiting(self) -> list[StoredOutboxRow]:
        rows = self.storage.fetch("SELECT id, sender, recipient, body, trace FROM outbox ORDER BY id")
        return [(int(i), str(s), r, str(b), t) for i, s, r, b, t in rows]

    def write(self, inserts: Sequence[OutboxRow], removals: Sequence[int]) -> None:
        try:
            with self.storage.transaction():
                self.storage.executemany(
                    "INSERT INTO outbox (id, sender, recipient, body, enqueued_at, trace) VALUES (?, ?, ?, ?, ?, ?)",
                    inserts,
                )
                self.storage.executemany("DELETE FROM outbox WHERE id = ?", [(row,) for row in removals])
        except sqlite3.Error as exc:
            raise OutboxWriteError(str(exc)) from exc

    def close(self) -> None:
        self.storage.close()
