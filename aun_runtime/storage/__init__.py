"""Where the archive, a worker's journal, a service's ledger and the other stores keep their rows.

[`Storage`][aun_runtime.Storage] is the little the runtime asks of a database (run a statement,
fetch rows, run a script, a transaction, close); its `dialect` says what that database spells its
own way, so that the stores never ask which database they talk to. Two implementations:

* `SQLiteStorage` (`_sqlite`): an SQLite file (or `":memory:"`) on this machine, in WAL mode, the
  default, what `make demo` and one machine use;
* `PostgresStorage` (`_postgres`): a session with a PostgreSQL server, the store several machines
  share.

`open_storage` (`_open`) picks one from the location: a `postgresql://` URL is a PostgreSQL server,
anything else an SQLite file. What a new database touches is listed in docs/where-things-live.md.
"""

from ._open import (
    DIALECTS,
    POSTGRES_SCHEMES,
    as_location,
    dialect_for,
    is_missing_table,
    is_postgres_url,
    open_storage,
    shown_location,
)
from ._postgres import (
    CONNECT_TIMEOUT,
    POSTGRESQL,
    SESSION_TIMEOUT,
    STATEMENT_WAIT,
    PostgresDialect,
    PostgresStorage,
    redacted_url,
)
from ._protocol import (
    ArchiveSQL,
    Dialect,
    JournalSQL,
    LockKey,
    Row,
    ServiceLedgerSQL,
    SessionLocks,
    Storage,
    StorageKind,
)
from ._scoped_sql import ScopedSQL
from ._sqlite import (
    SQLITE,
    SQLITE_BUSY_TIMEOUT,
    SQLITE_SYNCHRONOUS_VARIABLE,
    SQLiteDialect,
    SQLiteStorage,
    check_sqlite_tables,
    open_wal,
)

__all__ = [
    "CONNECT_TIMEOUT",
    "DIALECTS",
    "POSTGRESQL",
    "POSTGRES_SCHEMES",
    "SESSION_TIMEOUT",
    "SQLITE",
    "SQLITE_BUSY_TIMEOUT",
    "SQLITE_SYNCHRONOUS_VARIABLE",
    "STATEMENT_WAIT",
    "ArchiveSQL",
    "Dialect",
    "JournalSQL",
    "LockKey",
    "PostgresDialect",
    "PostgresStorage",
    "Row",
    "SQLiteDialect",
    "SQLiteStorage",
    "ScopedSQL",
    "ServiceLedgerSQL",
    "SessionLocks",
    "Storage",
    "StorageKind",
    "as_location",
    "check_sqlite_tables",
    "dialect_for",
    "is_missing_table",
    "is_postgres_url",
    "open_storage",
    "open_wal",
    "redacted_url",
    "shown_location",
]
