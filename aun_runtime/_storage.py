"""Where the archive, a worker's journal and a service ledger keep their rows: one interface, two databases.

[`Storage`][aun_runtime.Storage] is the little the runtime asks of a database: run a statement, fetch
rows, run a statement over many rows, run a script, group statements in a transaction, close. Two
implementations hold it to the same contract:

* `SQLiteStorage`: an SQLite file (or `":memory:"`) on this machine, in WAL mode, the default,
  and what `make demo` and one machine use;
* `PostgresStorage` (in `aun_runtime._postgres_storage`): a connection to a PostgreSQL server,
  the store several machines share.

Statements are written once, with `?` placeholders and SQL both databases speak
(`INSERT ... ON CONFLICT ... DO UPDATE`, `COALESCE`, `CASE`); the PostgreSQL implementation numbers
the placeholders as its protocol wants. Where the two differ (table definitions, the archive's
one-statement batch insert, locks) the module that owns the tables says so, keyed by
[`Storage.kind`][aun_runtime.Storage.kind].

`open_storage` picks the implementation from the location: a
`postgresql://` (or `postgres://`) URL is a PostgreSQL server, anything else an SQLite file.

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
from typing import Any, Literal, Protocol, runtime_checkable

from ._errors import StorageUnavailableError

__all__ = [
    "POSTGRES_SCHEMES",
    "SQLITE_SYNCHRONOUS_VARIABLE",
    "SQLiteStorage",
    "ScopedSQL",
    "Storage",
    "StorageKind",
    "check_sqlite_tables",
    "is_missing_table",
    "is_postgres_url",
    "open_storage",
    "open_wal",
]

StorageKind = Literal["sqlite", "postgresql"]
#: URL schemes that name a PostgreSQL server (libpq accepts both).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
#: Seconds an SQLite statement waits for another connection's write lock (a console reading, a
#: second instance's ledger transaction) before it fails: far over any transaction the runtime makes.
SQLITE_BUSY_TIMEOUT = 30.0

#: The environment variable that chooses what an SQLite commit survives (see the module's docstring).
SQLITE_SYNCHRONOUS_VARIABLE = "AUN_SQLITE_SYNCHRONOUS"
_SQLITE_SYNCHRONOUS = ("normal", "full")

Row = tuple[Any, ...]


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


def is_postgres_url(location: str | Path) -> bool:
    """Whether `location` names a PostgreSQL server rather than an SQLite file."""
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


@runtime_checkable
class Storage(Protocol):
    """A connection to the database that holds an archive, a journal or a ledger.

    One caller at a time: the archive's writer serialises its users, and a ledger is used from the
    event loop only. Statements use `?` placeholders.
    """

    #: Which database: `"sqlite"` or `"postgresql"`.
    kind: StorageKind
    #: The file path or URL it was opened with (a URL without its password).
    location: str

    def execute(self, sql: str, args: Sequence[object] = ()) -> None:
        """Run one statement that returns no rows."""
        ...

    def fetch(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        """Run one statement and return all its rows."""
        ...

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        """Run one statement once per row of arguments."""
        ...

    def script(self, sql: str) -> None:
        """Run several statements without arguments (table definitions)."""
        ...

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """Statements inside are committed together, or (when the block raises) not at all."""
        ...

    def close(self) -> None:
        """Close the connection. Idempotent."""
        ...


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

    def close(self) -> None:
        self.db.close()


class ScopedSQL:
    """Statements of tables that, in one of the databases, carry one more key column first.

    A shared PostgreSQL database holds what one SQLite file holds for one owner (a worker's journal,
    one service's ledger), so there its tables start with the owner's column; in SQLite they do not.
    A statement is written once with `{cols}`, `{vals}` and `{where}` where that column goes.

    Args:
        column: the owner's column (`worker`, `aid`), or None where the tables have none.
        value: the owner.

    Example:
        >>> ScopedSQL("aid", "svc.local").sql("SELECT seq FROM t WHERE {where}seq > ?")
        'SELECT seq FROM t WHERE aid = ? AND seq > ?'
        >>> ScopedSQL(None, "svc.local").sql("INSERT INTO t ({cols}seq) VALUES ({vals}?)")
        'INSERT INTO t (seq) VALUES (?)'
    """

    def __init__(self, column: str | None, value: str) -> None:
        self.cols = f"{column}, " if column else ""
        self.vals = "?, " if column else ""
        self.where = f"{column} = ? AND " if column else ""
        self.args: tuple[str, ...] = (value,) if column else ()

    def sql(self, template: str) -> str:
        return template.format(cols=self.cols, vals=self.vals, where=self.where)

    def rows(self, rows: Iterable[Sequence[object]]) -> list[tuple[object, ...]]:
        """Argument rows with the owner first (where the tables have its column)."""
        return [(*self.args, *row) for row in rows]


def check_sqlite_tables(db: sqlite3.Connection | Storage, schema: str, location: str) -> None:
    """Before the statements of `schema` create anything in an SQLite file (or a reader reads it):
    refuse a file whose tables by those names lack the columns `schema` gives them. An SQLite file
    carries no mark of its own (many were made before PostgreSQL's, `aun_runtime._schema_marker`):
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


def is_missing_table(error: BaseException) -> bool:
    """Whether `error` says a table does not exist (yet): a reader ahead of the writer that makes it."""
    if isinstance(error, sqlite3.OperationalError):
        return "no such table" in str(error)
    return type(error).__name__ == "UndefinedTableError"  # asyncpg's, for PostgreSQL's 42P01


def open_storage(location: str | Path, *, read_only: bool = False, tables: str | None = None) -> Storage:
    """The storage at `location`: a PostgreSQL server for a `postgresql://` URL, else an SQLite file
    (checked against the SQLite `tables` its user keeps there, see `SQLiteStorage`).

    Raises:
        FileNotFoundError: `read_only` and there is no SQLite file at `location`.
        StorageUnavailableError: the PostgreSQL server cannot be reached or refuses the connection.
    """
    if is_postgres_url(location):
        from ._postgres_storage import PostgresStorage

        return PostgresStorage(str(location), read_only=read_only)
    return SQLiteStorage(location, read_only=read_only, tables=tables)
