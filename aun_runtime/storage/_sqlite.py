"""`Storage` on an SQLite file, and the SQLite `Dialect`: the default, what `make demo` and one machine use.

**What an SQLite commit survives** is chosen once for every SQLite file the runtime writes (archive,
journal, ledgers, agent states, a gateway agent's outbox, the local gateway's database) by
`AUN_SQLITE_SYNCHRONOUS`: `normal` (the default) writes each commit to the write-ahead log, which
survives a crash of the process (its data is the kernel's the moment the commit returns), but not a
crash of the machine or a power loss, which may take the last commits back (never half of one);
`full` also flushes the log to the disk at each commit, so that a commit survives those too, at one
flush per commit.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final

from ..base._errors import StorageUnavailableError
from ._protocol import Dialect, LockKey, Row, Storage, StorageKind
from ._scoped_sql import ScopedSQL

__all__ = [
    "SQLITE",
    "SQLITE_BUSY_TIMEOUT",
    "SQLITE_SYNCHRONOUS_VARIABLE",
    "SQLiteDialect",
    "SQLiteStorage",
    "check_sqlite_tables",
    "open_wal",
]

#: Seconds an SQLite statement waits for another connection's write lock (a console reading, a
#: second instance's ledger transaction) before it fails: far over any transaction the runtime makes.
SQLITE_BUSY_TIMEOUT = 30.0

#: The environment variable that chooses what an SQLite commit survives (see the module's docstring).
SQLITE_SYNCHRONOUS_VARIABLE = "AUN_SQLITE_SYNCHRONOUS"
_SQLITE_SYNCHRONOUS = ("normal", "full")


def open_wal(db: sqlite3.Connection) -> None:
    """Put `db` in WAL mode with the `synchronous` that `AUN_SQLITE_SYNCHRONOUS` chooses.

    Raises:
        StorageUnavailableError: the variable holds neither `normal` nor `full` (`db` is closed).
    """
    chosen = os.environ.get(SQLITE_SYNCHRONOUS_VARIABLE, "normal").strip().lower() or "normal"
    if chosen not in _SQLITE_SYNCHRONOUS:
        db.close()
        raise StorageUnavailableError(
            f"{SQLITE_SYNCHRONOUS_VARIABLE}={chosen!r}: say normal (a commit survives a crash of the process)"
            " or full (also a crash of the machine or a power loss)"
        )
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={chosen.upper()}")

# -- the archive's tables and batch insert, as SQLite spells them (see aun_runtime.storage._archive_sql) -----

_ARCHIVE_TABLES = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    message_id TEXT NOT NULL,
    from_aid TEXT NOT NULL,
    to_aid TEXT,
    group_id TEXT,
    thread TEXT,
    in_reply_to TEXT,
    created_at INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY,
    owner TEXT NOT NULL,
    kind TEXT NOT NULL,
    reason TEXT,
    message INTEGER REFERENCES messages(id),
    text TEXT,
    recorded_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS records_owner ON records(owner, id);
CREATE VIEW IF NOT EXISTS archive AS
{view}CREATE TABLE IF NOT EXISTS agents (
    aid TEXT PRIMARY KEY,
    role TEXT NOT NULL,
    mode TEXT NOT NULL,
    description TEXT NOT NULL,
    card TEXT,
    registered_at INTEGER NOT NULL
);
"""
# A batch is written by one statement: the JSON of its message rows and of its records inserted into
# a view (of the writer's session only) whose trigger fills both tables.
_ARCHIVE_BATCH_VIEW = """
CREATE TEMP VIEW IF NOT EXISTS archive_batch (messages, records, now) AS SELECT NULL, NULL, NULL;
CREATE TEMP TRIGGER IF NOT EXISTS archive_batch_insert INSTEAD OF INSERT ON archive_batch BEGIN
    INSERT INTO messages (id, message_id, from_aid, to_aid, group_id, thread, in_reply_to, created_at, body)
    SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>6, value->>7, value->>8
    FROM json_each(NEW.messages) ORDER BY key;
    INSERT INTO records (owner, kind, reason, message, text, recorded_at)
    SELECT value->>0, value->>1, value->>2, value->>3, value->>4,
           CASE WHEN value->>5 > 0 THEN value->>5 ELSE NEW.now END
    FROM json_each(NEW.records) ORDER BY key;
END;
"""
_ARCHIVE_INSERT_BATCH = "INSERT INTO archive_batch (messages, records, now) VALUES (?, ?, ?)"


#: A worker's journal, in its archive file (`aun_runtime.distributed._journal`).
_JOURNAL_TABLES = """
CREATE TABLE IF NOT EXISTS aun_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS aun_outbox (aid TEXT NOT NULL, seq INTEGER NOT NULL, event BLOB NOT NULL,
    PRIMARY KEY (aid, seq));
CREATE TABLE IF NOT EXISTS aun_out_streams (aid TEXT PRIMARY KEY, last_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS aun_in_streams (origin TEXT NOT NULL, aid TEXT NOT NULL,
    through INTEGER NOT NULL, PRIMARY KEY (origin, aid));
CREATE TABLE IF NOT EXISTS aun_in_handled (origin TEXT NOT NULL, aid TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (origin, aid, seq));
"""
#: One service AID's ledger file, shared by its instances on this machine (`._service_store`).
_SERVICE_LEDGER_TABLES = """
CREATE TABLE IF NOT EXISTS svc_claims (origin TEXT NOT NULL, seq INTEGER NOT NULL, instance TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0, at INTEGER NOT NULL, PRIMARY KEY (origin, seq));
CREATE TABLE IF NOT EXISTS svc_streams (origin TEXT PRIMARY KEY, through INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS svc_instances (instance TEXT PRIMARY KEY, journal TEXT NOT NULL);
"""


class SQLiteDialect:
    """What SQLite spells its own way. A file holds one owner's rows, so no table is scoped."""

    name: StorageKind = "sqlite"
    shared = False

    # -- any store ----------------------------------------------------------------------------------

    def is_missing_table(self, error: BaseException) -> bool:
        return isinstance(error, sqlite3.OperationalError) and "no such table" in str(error)

    def scoped(self, column: str, value: str) -> ScopedSQL:
        return ScopedSQL(None, value)

    # -- the archive ----------------------------------------------------------------------------------

    #: A file has one writer, which numbers message rows itself from the highest: no blocks.
    archive_row_block = 0
    #: The batch insert is one statement, and on a connection in autocommit mode a statement alone
    #: is a transaction.
    archive_batch_alone = True

    def create_tables(self, storage: Storage, schema: str) -> None:
        # Any store's tables. A file whose tables are not ours is refused, untouched.
        check_sqlite_tables(storage, schema, storage.location)
        storage.script(schema)

    def check_tables(self, storage: Storage, schema: str) -> None:
        check_sqlite_tables(storage, schema, storage.location)

    def archive_tables(self, view: str) -> str:
        return _ARCHIVE_TABLES.replace("{view}", view)

    def archive_prepare_writer(self, storage: Storage) -> None:
        storage.script(_ARCHIVE_BATCH_VIEW)

    def archive_message_rows(self, storage: Storage) -> int:
        return int(storage.fetch("SELECT COALESCE(MAX(id), 0) + 1 FROM messages")[0][0])

    def archive_insert_batch(self, storage: Storage, messages: str, records: str, now: int) -> None:
        storage.execute(_ARCHIVE_INSERT_BATCH, (messages, records, now))

    # -- session locks (a file has no sessions: its owner proves life by the file's own lock) ---------

    def _no_sessions(self) -> StorageUnavailableError:
        return StorageUnavailableError("an SQLite file has no sessions to lock: give a shared database")

    def try_lock(self, db: Storage, key: LockKey) -> bool:
        raise self._no_sessions()

    def holds_lock(self, db: Storage, key: LockKey) -> bool:
        raise self._no_sessions()

    def unlock(self, db: Storage, key: LockKey) -> None:
        raise self._no_sessions()

    def end_lock_holders(self, db: Storage, key: LockKey) -> str | None:
        raise self._no_sessions()

    def renew_lease(self, db: Storage, owner: str, seconds: float) -> None:
        raise self._no_sessions()

    def lease_expired(self, db: Storage, owner: str) -> bool:
        raise self._no_sessions()

    # -- a worker's journal and outbox ---------------------------------------------------------------

    journal_tables = _JOURNAL_TABLES

    def claim_worker(self, db: Storage, worker: str, lock_class: int, wait: float) -> tuple[int, str] | None:
        return None  # the file is this worker's: it keeps its name in aun_meta

    def checkpoints_by_writer(self, db: Storage, pages: int) -> bool:
        db.execute(f"PRAGMA wal_autocheckpoint={int(pages)}")
        return True

    # -- a service's ledger and liveness -------------------------------------------------------------

    service_ledger_tables = _SERVICE_LEDGER_TABLES

    # -- the host's state and election: a file-backed host keeps a JSON file instead ------------------

    # -- agent state, checkpoint, the gateway's store, the network outbox ----------------------------

    # WITHOUT ROWID: the rows are looked up by their key only, and are stored once, in its order.
    agent_states_table = """
CREATE TABLE IF NOT EXISTS agent_states (
    agent_type TEXT NOT NULL,
    agent_key TEXT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (agent_type, agent_key)
) WITHOUT ROWID;
"""
    # INTEGER PRIMARY KEY: the id is the row's rowid, the order the rows are read back in.
    outbox_table = """
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY,
    sender TEXT NOT NULL,
    recipient TEXT,
    body TEXT NOT NULL,
    enqueued_at INTEGER NOT NULL,
    trace TEXT
);
"""

    def columns(self, storage: Storage, table: str) -> set[str]:
        return {str(row[1]) for row in storage.fetch(f"PRAGMA table_info({table})")}


#: The SQLite dialect (it holds no state: one serves every file).
SQLITE: Final = SQLiteDialect()


class SQLiteStorage:
    """An SQLite file in WAL mode (or `":memory:"`), opened in autocommit mode.

    Args:
        path: the file (created with its directory if missing), or `":memory:"`.
        read_only: open an existing file without ever writing to it.
        tables: the table definitions its user keeps there: a file whose tables by those names lack
            their columns (another application's) is refused before anything is written to it.

    Raises:
        FileNotFoundError: `read_only` and there is no file at `path`.
        StorageUnavailableError: `path` is no regular file (a directory, a device), or no SQLite
            database, or cannot be made; nothing is written to it.

    Example:
        >>> storage = SQLiteStorage(":memory:")
        >>> storage.script("CREATE TABLE t (n INTEGER)")
        >>> with storage.transaction():
        ...     storage.executemany("INSERT INTO t (n) VALUES (?)", [(1,), (2,)])
        >>> storage.fetch("SELECT SUM(n) FROM t")
        [(3,)]
        >>> storage.close()
    """

    kind: StorageKind = "sqlite"
    dialect: Dialect = SQLITE
    #: Never called: a file has no session that could end.
    on_lost: Callable[[BaseException], None] | None = None

    def __init__(self, path: str | Path = ":memory:", *, read_only: bool = False, tables: str | None = None) -> None:
        self.location = str(path)
        self._tables = tables
        if read_only:
            file = Path(self.location)
            if self.location == ":memory:" or not file.is_file():
                raise FileNotFoundError(
                    f"no archive file at {self.location}: a runtime creates it with AUNRuntime(archive=path)"
                )
            # mode=ro: SQLite itself refuses every write, so a reader never disturbs the writer's file.
            self.db = self._opened(lambda: sqlite3.connect(
                f"{file.resolve().as_uri()}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=SQLITE_BUSY_TIMEOUT,
            ), "PRAGMA schema_version")  # fmt: skip
            return
        if self.location != ":memory:":
            self._refuse_unless_file()
        self.db = self._opened(lambda: sqlite3.connect(
            self.location, isolation_level=None, check_same_thread=False, timeout=SQLITE_BUSY_TIMEOUT
        ), "PRAGMA schema_version")  # fmt: skip
        open_wal(self.db)  # only now: a file refused above is left as it was

    def _refuse_unless_file(self) -> None:
        """A path that is there must be a regular file; else its directory is made (nothing else is)."""
        path = Path(self.location)
        try:
            if path.exists() and not path.is_file():
                raise StorageUnavailableError(
                    f"{self.location} is no regular file (a directory or a device): give the path of an SQLite file"
                    " (made if missing)",
                    value=self.location,
                )
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageUnavailableError(
                f"cannot make an SQLite file at {self.location}: {exc}", value=self.location
            ) from None

    def _opened(self, connect: Callable[[], sqlite3.Connection], first: str) -> sqlite3.Connection:
        """The connection, after its `first` statement (which reads the file's header, so a file that
        is no SQLite database is refused before anything is written to it)."""
        try:
            db = connect()
        except sqlite3.Error as exc:
            raise StorageUnavailableError(f"cannot open {self.location}: {exc}", value=self.location) from None
        try:
            db.execute(first)
        except sqlite3.DatabaseError as exc:
            db.close()
            if isinstance(exc, sqlite3.OperationalError):  # busy, or the disk: not the file's fault
                raise
            raise StorageUnavailableError(
                f"{self.location} is no SQLite database ({exc}): give the path of an archive file (made if missing)",
                value=self.location,
            ) from None
        if self._tables is not None:
            try:
                check_sqlite_tables(db, self._tables, self.location)
            except BaseException:
                db.close()
                raise
        return db

    def execute(self, sql: str, args: Sequence[object] = ()) -> None:
        self.db.execute(sql, args)

    def fetch(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        return self.db.execute(sql, args).fetchall()

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        self.db.executemany(sql, rows)

    def script(self, sql: str) -> None:
        self.db.executescript(sql)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        # IMMEDIATE: the write lock is taken at the start, so two writers (the instances of a
        # service sharing a ledger file) wait for each other instead of failing at their first write.
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def watch(self) -> None:
        return  # a file has no session to watch

    def close(self) -> None:
        self.db.close()


def check_sqlite_tables(db: sqlite3.Connection | Storage, schema: str, location: str) -> None:
    """Before the statements of `schema` create anything in an SQLite file (or a reader reads it):
    refuse a file whose tables by those names lack the columns `schema` gives them. An SQLite file
    carries no mark of its own (many were made before PostgreSQL's, `aun_runtime.storage._schema_marker`):
    the columns are what tell the runtime's tables from another application's.

    Raises:
        StorageUnavailableError: such a table is there (another application's file, given by mistake).
    """

    def rows(sql: str, on: sqlite3.Connection | Storage) -> list[Row]:
        return on.execute(sql).fetchall() if isinstance(on, sqlite3.Connection) else on.fetch(sql)

    def columns(table: str, on: sqlite3.Connection | Storage) -> set[str]:
        return {str(row[1]) for row in rows(f"PRAGMA table_info({table})", on)}

    expected = sqlite3.connect(":memory:")
    try:
        expected.executescript(schema)
        tables = [str(row[0]) for row in rows("SELECT name FROM sqlite_master WHERE type = 'table'", expected)]
        present = {str(row[0]) for row in rows("SELECT name FROM sqlite_master WHERE type = 'table'", db)}
        foreign = [table for table in tables if table in present and not columns(table, expected) <= columns(table, db)]
    finally:
        expected.close()
    if foreign:
        raise StorageUnavailableError(
            f"the SQLite file {location} holds {', '.join(foreign)}, not made by aun-runtime (other columns):"
            " nothing was changed; give the runtime a file of its own",
            value=location,
        )
