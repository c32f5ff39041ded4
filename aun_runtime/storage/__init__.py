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

from ._open import DIALECTS, dialect_for, is_missing_table, open_storage
from ._postgres import POSTGRESQL, PostgresStorage
from ._protocol import (
    ArchiveSQL,
    Dialect,
    JournalSQL,
    Row,
    ServiceLedgerSQL,
    SessionLocks,
    Storage,
    StorageKind,
)
from ._sqlite import SQLITE, SQLiteStorage

__all__ = [
    "DIALECTS",
    "POSTGRESQL",
    "SQLITE",
    "ArchiveSQL",
    "Dialect",
    "JournalSQL",
    "PostgresStorage",
    "Row",
    "SQLiteStorage",
    "ServiceLedgerSQL",
    "SessionLocks",
    "Storage",
    "StorageKind",
    "dialect_for",
    "is_missing_table",
    "open_storage",
]
