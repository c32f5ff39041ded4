"""The gateway's SQLite file: schema, WAL mode and group commit.

Everything the gateway acknowledges is in this file before the acknowledgement leaves: a message is
inserted, the transaction is committed, and only then is the sender answered and the receivers
pushed. A restart therefore loses nothing a sender was told was stored.

Writes are batched by *group commit*: each operation runs in a savepoint of one open transaction,
and `Database.commit` commits that transaction once per event-loop turn for every operation
that wrote during the turn. Twenty concurrent senders cost one commit, not twenty; a lone sender
costs one commit and no waiting. The file is opened by the storage package's `SQLiteStorage`, as
every SQLite file of the runtime: in WAL mode with the `synchronous` that
`AUN_SQLITE_SYNCHRONOUS` chooses (`aun_runtime.storage.open_wal`): `normal`, the default, makes a
commit survive a crash of the process (what a restart is), and a crash of the machine or a power loss
can drop the last commits; `full` makes it survive those too, at one flush per group commit.

Checkpoints (copying the WAL into the database file, with an fsync) never run on the event loop:
automatic checkpoints are off for the loop's connection, and a `Checkpointer` thread with its
own connection runs a passive checkpoint every `CHECKPOINT_INTERVAL` seconds (SQLite releases
the GIL while it works). The WAL therefore holds at most about one interval of writes before it is
reused; it is truncated when the database closes.

Schema:

```text
meta            (key PK, value)                                  -- schema version, issuer domain
certificates    (serial PK hex, aid, cert_pem, cert_sha256, spki_sha256, issued_at, revoked_at)
identities      (aid PK, serial)                                 -- the AID's current certificate
tokens          (token_hash PK, kind access|refresh, aid, family, refresh_count, expires_at, revoked)
prekeys         (aid, device_id, body JSON, updated_at)          -- E2EE signed prekeys, public
inbox           (receiver, seq, sender, message_id, body JSON)   -- direct messages; seq per receiver
peer_cursors    (receiver, device_id, slot_id, sender, ack_seq)  -- what each device has consumed
groups          (group_id PK, name, owner_aid, description, visibility, mention_mode, status,
                 message_seq, event_seq, created_at)
group_members   (group_id, aid, role owner|admin|member, join_seq, joined_at)
group_messages  (group_id, seq, sender, message_id, body JSON)
group_events    (group_id, event_seq, body JSON)
group_cursors   (group_id, aid, device_id, slot_id, ack_seq, event_ack_seq)
agent_cards     (aid PK, body BLOB, etag, updated_at, behavior_mode)  -- one agent.md per AID
queue_assignments (receiver, seq, sender, device_id, slot_id, moved_to, open)  -- queue mode: which
                member each inbox message went to, whether it is still unacknowledged, its copy
group_prekeys   (group_id, aid, device_id, body JSON, updated_at)    -- group E2EE device prekeys, public
group_states    (group_id PK, body JSON)        -- the last confirmed signed membership state
group_proposals (group_id PK, proposal_id, body JSON, created_at)    -- a state waiting for confirm
group_aids      (group_id PK, serial)           -- the certificate a group's AID was bound to
group_departures (group_id, aid, event_seq, left_at)   -- who left a group, and its last event they may read
group_invites   (invite_id PK, group_id, invitee_aid, inviter_aid, member_type, created_at, expires_at)
group_transfers (group_id PK, body JSON)        -- an owner transfer waiting for the new owner's rekey
```

`(sender, message_id)` is unique in `inbox` and `(group_id, sender, message_id)` in
`group_messages`: a retried send finds its first copy and gets the same answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..storage import Row, SQLiteStorage

__all__ = ["Checkpointer", "Database"]

log = logging.getLogger("aun_runtime.gateway")

SCHEMA_VERSION = "1"
#: Seconds between passive WAL checkpoints, the bound on how much the WAL grows between them.
CHECKPOINT_INTERVAL = 1.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS certificates (
    serial TEXT PRIMARY KEY, aid TEXT NOT NULL, cert_pem TEXT NOT NULL, cert_sha256 TEXT NOT NULL,
    spki_sha256 TEXT NOT NULL, issued_at REAL NOT NULL, revoked_at REAL);
CREATE INDEX IF NOT EXISTS certificates_by_aid ON certificates (aid);
CREATE TABLE IF NOT EXISTS identities (aid TEXT PRIMARY KEY, serial TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tokens (
    token_hash TEXT PRIMARY KEY, kind TEXT NOT NULL, aid TEXT NOT NULL, family TEXT NOT NULL,
    refresh_count INTEGER NOT NULL, expires_at REAL NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS tokens_by_family ON tokens (family);
CREATE TABLE IF NOT EXISTS prekeys (
    aid TEXT NOT NULL, device_id TEXT NOT NULL, body TEXT NOT NULL, updated_at REAL NOT NULL,
    PRIMARY KEY (aid, device_id));
CREATE TABLE IF NOT EXISTS inbox (
    receiver TEXT NOT NULL, seq INTEGER NOT NULL, sender TEXT NOT NULL, message_id TEXT NOT NULL,
    body TEXT NOT NULL, PRIMARY KEY (receiver, seq)) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS inbox_idempotency ON inbox (sender, message_id);
CREATE INDEX IF NOT EXISTS inbox_by_peer ON inbox (receiver, sender, seq);
CREATE TABLE IF NOT EXISTS peer_cursors (
    receiver TEXT NOT NULL, device_id TEXT NOT NULL, slot_id TEXT NOT NULL, sender TEXT NOT NULL,
    ack_seq INTEGER NOT NULL, PRIMARY KEY (receiver, device_id, slot_id, sender)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS groups (
    group_id TEXT PRIMARY KEY, name TEXT NOT NULL, owner_aid TEXT NOT NULL, description TEXT NOT NULL,
    visibility TEXT NOT NULL, mention_mode TEXT NOT NULL, status TEXT NOT NULL,
    message_seq INTEGER NOT NULL, event_seq INTEGER NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS group_members (
    group_id TEXT NOT NULL, aid TEXT NOT NULL, role TEXT NOT NULL, join_seq INTEGER NOT NULL,
    joined_at REAL NOT NULL, PRIMARY KEY (group_id, aid)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS group_members_by_aid ON group_members (aid);
CREATE INDEX IF NOT EXISTS groups_by_owner ON groups (owner_aid, status);
CREATE TABLE IF NOT EXISTS group_messages (
    group_id TEXT NOT NULL, seq INTEGER NOT NULL, sender TEXT NOT NULL, message_id TEXT NOT NULL,
    body TEXT NOT NULL, PRIMARY KEY (group_id, seq)) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS group_messages_idempotency ON group_messages (group_id, sender, message_id);
CREATE TABLE IF NOT EXISTS group_events (
    group_id TEXT NOT NULL, event_seq INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (group_id, event_seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS group_cursors (
    group_id TEXT NOT NULL, aid TEXT NOT NULL, device_id TEXT NOT NULL, slot_id TEXT NOT NULL,
    ack_seq INTEGER NOT NULL, event_ack_seq INTEGER NOT NULL,
    PRIMARY KEY (group_id, aid, device_id, slot_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS agent_cards (
    aid TEXT PRIMARY KEY, body BLOB NOT NULL, etag TEXT NOT NULL, updated_at REAL NOT NULL,
    behavior_mode TEXT);
CREATE TABLE IF NOT EXISTS queue_assignments (
    receiver TEXT NOT NULL, seq INTEGER NOT NULL, sender TEXT NOT NULL, device_id TEXT NOT NULL,
    slot_id TEXT NOT NULL, moved_to INTEGER, open INTEGER NOT NULL, PRIMARY KEY (receiver, seq)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS queue_open ON queue_assignments (receiver, device_id, slot_id, sender, seq) WHERE open = 1;
CREATE TABLE IF NOT EXISTS group_prekeys (
    group_id TEXT NOT NULL, aid TEXT NOT NULL, device_id TEXT NOT NULL, body TEXT NOT NULL,
    updated_at REAL NOT NULL, PRIMARY KEY (group_id, aid, device_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS group_states (group_id TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS group_proposals (
    group_id TEXT PRIMARY KEY, proposal_id TEXT NOT NULL, body TEXT NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS group_aids (group_id TEXT PRIMARY KEY, serial TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS group_departures (
    group_id TEXT NOT NULL, aid TEXT NOT NULL, event_seq INTEGER NOT NULL, left_at REAL NOT NULL,
    PRIMARY KEY (group_id, aid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS group_invites (
    invite_id TEXT PRIMARY KEY, group_id TEXT NOT NULL, invitee_aid TEXT NOT NULL, inviter_aid TEXT NOT NULL,
    member_type TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS group_invites_by_group ON group_invites (group_id, invitee_aid);
CREATE INDEX IF NOT EXISTS group_invites_by_invitee ON group_invites (invitee_aid, group_id);
CREATE TABLE IF NOT EXISTS group_transfers (group_id TEXT PRIMARY KEY, body TEXT NOT NULL);
"""


class Database:
    """One SQLite file, used from the event loop's thread only.

    The gateway is a program of one SQLite file: its stores (`_identities`, `_inboxes`,
    `_group_store`...) speak SQLite's SQL through `row`, `rows`, `execute` and `executemany`, their
    writes inside `atomic`. The file is opened by `SQLiteStorage`, in autocommit mode: the
    transactions are opened and closed here.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.storage = SQLiteStorage(path)
        self.closed = False
        self.storage.execute("PRAGMA wal_autocheckpoint=0")  # the Checkpointer thread does it
        self.storage.execute("PRAGMA foreign_keys=OFF")
        self.storage.script(_SCHEMA)
        self.storage.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
        self._in_transaction = False
        self._commit_waiters: asyncio.Future[None] | None = None
        #: Called after a failed commit rolled everything back, so in-memory caches drop what they
        #: learned from the lost writes.
        self.on_rollback: list[Callable[[], None]] = []
        self._checkpointer = Checkpointer(path, CHECKPOINT_INTERVAL)
        self._checkpointer.start()

    def row(self, sql: str, args: Sequence[object] = ()) -> Row | None:
        """The first row `sql` returns (None if none)."""
        rows = self.storage.fetch(sql, args)
        return rows[0] if rows else None

    def value(self, sql: str, args: Sequence[object] = ()) -> Any:
        """The first column of the one row `sql` returns (an aggregate: `COUNT`, `MAX`...)."""
        return self.storage.fetch(sql, args)[0][0]

    def rows(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        """Every row `sql` returns."""
        return self.storage.fetch(sql, args)

    def execute(self, sql: str, args: Sequence[object] = ()) -> None:
        """Run a statement that returns no rows (a write: inside `atomic`)."""
        self.storage.execute(sql, args)

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        """Run a statement once per row of arguments (a write: inside `atomic`)."""
        self.storage.executemany(sql, rows)

    def meta(self, key: str) -> str | None:
        row = self.row("SELECT value FROM meta WHERE key = ?", (key,))
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.atomic():
            self.storage.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Run the block's writes all or nothing, inside the open group-commit transaction."""
        if not self._in_transaction:
            self.storage.execute("BEGIN IMMEDIATE")
            self._in_transaction = True
        self.storage.execute("SAVEPOINT op")
        try:
            yield
        except BaseException:
            self.storage.execute("ROLLBACK TO op")
            self.storage.execute("RELEASE op")
            raise
        self.storage.execute("RELEASE op")

    async def commit(self) -> None:
        """Return once everything written so far is committed (one commit per loop turn)."""
        if not self._in_transaction:
            return
        if self._commit_waiters is None:
            loop = asyncio.get_running_loop()
            self._commit_waiters = loop.create_future()
            loop.call_soon(self._commit_now)
        await asyncio.shield(self._commit_waiters)

    def commit_sync(self) -> None:
        """Commit at once (used on shutdown and outside a running loop)."""
        self._commit_now()

    def _commit_now(self) -> None:
        waiters, self._commit_waiters = self._commit_waiters, None
        error: BaseException | None = None
        if self._in_transaction:
            try:
                self.storage.execute("COMMIT")
            except sqlite3.Error as exc:  # disk full, I/O error: every waiting writer must hear of it
                error = exc
                with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back already
                    self.storage.execute("ROLLBACK")
                for forget in self.on_rollback:
                    forget()
            finally:
                self._in_transaction = False
        if waiters is not None and not waiters.done():
            if error is None:
                waiters.set_result(None)
            else:
                waiters.set_exception(error)

    def close(self) -> None:
        self._commit_now()
        self._checkpointer.stop()
        with contextlib.suppress(sqlite3.Error):
            self.storage.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.storage.close()
        self.closed = True


class Checkpointer(threading.Thread):
    """Runs passive WAL checkpoints on its own connection, off the event loop."""

    def __init__(self, path: Path, interval: float) -> None:
        super().__init__(name=f"gateway-checkpointer-{path.name}", daemon=True)
        self.path = path
        self.interval = interval
        self._stopping = threading.Event()

    def run(self) -> None:
        storage = SQLiteStorage(self.path)
        storage.execute("PRAGMA busy_timeout=1000")
        try:
            while not self._stopping.wait(self.interval):
                try:
                    storage.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error as exc:  # a busy or failing disk: try again next interval
                    log.warning("WAL checkpoint of %s failed: %s", self.path, exc)
        finally:
            storage.close()

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=10)
