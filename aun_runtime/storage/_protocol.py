"""What the runtime asks of a database (`Storage`), and what it asks about one (`Dialect`).

`Storage` is the little every SQL store needs: run a statement, fetch rows, run a statement over
many rows, run a script, group statements in a transaction, close. Statements are written once,
with `?` placeholders and SQL both databases speak (`INSERT ... ON CONFLICT ... DO UPDATE`,
`COALESCE`, `CASE`).

`Dialect` is everything else: each statement or behaviour that is spelled differently on one
database than on another (table definitions, a batch insert in one statement, locks, fencing, a
shared database's owner column...). A store asks `storage.dialect.<member>`; it never asks which
database it is talking to, so a new database is one new dialect, not a branch in every store.
The members are grouped by the store that needs them, each group under a comment naming it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from ._scoped_sql import ScopedSQL

__all__ = [
    "ArchiveSQL", "Dialect", "JournalSQL", "LockKey", "Row", "ServiceLedgerSQL", "SessionLocks", "Storage", "StorageKind",
]

#: A database's name (`"sqlite"`, `"postgresql"`), for messages and metrics: a plain string, so that a
#: new database adds no member here, and never a reason to branch.
StorageKind = str
Row = tuple[Any, ...]


LockKey = tuple[int, int]


class SessionLocks(Protocol):
    """Proof of life on a shared database: a lock that a session holds while its owner runs (a
    worker's journal, the serving host), let go of by the server when the session ends. A lease
    that the owner renews from its event loop tells a frozen owner (its session alive) from a
    running one. A database of one owner's (a file) has no sessions: there these raise
    `StorageUnavailableError`, and its stores prove life otherwise (the file's own lock)."""

    def try_lock(self, db: Storage, key: LockKey) -> bool:
        """Take the lock `key` on `db`'s session if no other session holds it: whether it is held now."""
        ...

    def holds_lock(self, db: Storage, key: LockKey) -> bool:
        """Whether `db`'s own session holds the lock `key`."""
        ...

    def unlock(self, db: Storage, key: LockKey) -> None:
        """Let go of the lock `key` that `db`'s session holds."""
        ...

    def end_lock_holders(self, db: Storage, key: LockKey) -> str | None:
        """Inside a transaction: end the sessions that hold `key` (their owner is fenced). None once
        they are ended, else why the server refused (the transaction goes on either way)."""
        ...

    def renew_lease(self, db: Storage, owner: str, seconds: float) -> None:
        """`owner`'s lease runs `seconds` from now, by the server's clock."""
        ...

    def lease_expired(self, db: Storage, owner: str) -> bool:
        """Whether `owner`'s lease ran out (False for an owner that never took one)."""
        ...


class ArchiveSQL(Protocol):
    """What the archive (`aun_runtime.storage._archive_sql`) asks of a database: its tables, its batch insert
    in one statement, and how its message rows are numbered."""

    #: Message row numbers an archive takes at a time from `archive_message_rows`, where several
    #: archives write one database (0: the database has one writer, which numbers them itself).
    archive_row_block: int
    #: Whether one `archive_insert_batch` may run alone, as its own transaction (else the archive
    #: opens one around it).
    archive_batch_alone: bool

    def archive_tables(self, view: str) -> str:
        """The archive's table definitions, with `view` as the `archive` view's query."""
        ...

    def archive_prepare_writer(self, storage: Storage) -> None:
        """Make what the batch insert needs on the writer's session (after the tables)."""
        ...

    def archive_message_rows(self, storage: Storage) -> int:
        """The first message row number the archive may use next (a block of `archive_row_block`)."""
        ...

    def archive_insert_batch(self, storage: Storage, messages: str, records: str, now: int) -> None:
        """Insert a batch: the JSON arrays of its message rows and of its records (`now`: the time
        of a record that carries none)."""
        ...


class JournalSQL(Protocol):
    """What a worker's journal (`aun_runtime.distributed._journal`) asks of a database."""

    #: The journal's tables (beside the archive's), as this database defines them.
    journal_tables: str

    def claim_worker(self, db: Storage, worker: str, lock_class: int, wait: float) -> tuple[int, str] | None:
        """Register `worker` (once) and take its proof-of-life lock `(lock_class, id)` on `db`'s
        session: its lock id and its secret. None where the database is one worker's own file
        (nothing to claim).

        Raises:
            TimeoutError: another session held the lock for `wait` seconds (the worker runs elsewhere).
        """
        ...

    def checkpoints_by_writer(self, db: Storage, pages: int) -> bool:
        """Whether the writer checkpoints this database's log itself (a file's write-ahead log); if so,
        the database's own checkpoints are left for past `pages` pages of log."""
        ...


class ServiceLedgerSQL(Protocol):
    """What a service's ledger (`aun_runtime.distributed._service_store`) asks of a database."""

    #: The ledger's tables, as this database defines them.
    service_ledger_tables: str


class Dialect(ArchiveSQL, SessionLocks, JournalSQL, ServiceLedgerSQL, Protocol):
    """What differs between the databases a `Storage` may talk to, said once per database."""

    #: The database's name, for messages (`"sqlite"`, `"postgresql"`): never a reason to branch.
    name: StorageKind
    #: Whether one database holds many owners' rows (a server that several machines share) rather
    #: than one owner's (a file of its own): there an owner's tables carry its column, and an owner
    #: proves it lives by a lock its session holds (`SessionLocks`).
    shared: bool

    # -- any store ----------------------------------------------------------------------------------

    def is_missing_table(self, error: BaseException) -> bool:
        """Whether `error`, raised by this database, says a table does not exist (yet)."""
        ...

    def scoped(self, column: str, value: str) -> ScopedSQL:
        """Statements for tables one owner keeps: where one database holds several owners' rows
        (a shared server), its tables start with the owner's `column`; where it holds one owner's
        (a file of its own), they do not."""
        ...

    # -- any store's tables ------------------------------------------------------------------------

    def create_tables(self, storage: Storage, schema: str) -> None:
        """Create the tables of `schema` (this database's definitions) where missing: one creator at
        a time, and never in a database whose tables by those names are not the runtime's (any store).

        Raises:
            StorageUnavailableError: such tables are there (another application's database).
        """
        ...

    def check_tables(self, storage: Storage, schema: str) -> None:
        """For a reader: refuse a database whose tables by the names of `schema` are not the runtime's.

        Raises:
            StorageUnavailableError: such tables are there.
        """
        ...

    # -- the archive: its members are in `ArchiveSQL`, which `Dialect` joins ------------------------

    # -- a worker's journal and outbox; a service's ledger and liveness; the host election -----------
    # (their members are in `SessionLocks`, `JournalSQL` and `ServiceLedgerSQL`, which `Dialect` joins)

    # -- agent state, checkpoint, the gateway's store, the network outbox ----------------------------

    #: The agent state store's table: one row per agent, `(agent_type, agent_key)` its key, the
    #: state as JSON text.
    agent_states_table: str
    #: The network outbox's table: one row per message waiting for the network, `id` its order.
    outbox_table: str

    def columns(self, storage: Storage, table: str) -> set[str]:
        """The columns `table` has now (none if it is not there): a store adds to a table made
        before a column was."""
        ...


@runtime_checkable
class Storage(Protocol):
    """A connection to the database that holds an archive, a journal or a ledger.

    One caller at a time: the archive's writer serialises its users, and a ledger is used from the
    event loop only. Statements use `?` placeholders.
    """

    #: Which database: `"sqlite"` or `"postgresql"` (for messages; a store asks `dialect`).
    kind: StorageKind
    #: The file path or URL it was opened with (a URL without its password).
    location: str
    #: What is spelled differently on this database (see `Dialect`).
    dialect: Dialect
    #: Called once, from any thread, when the connection ends unasked (a server's session; never
    #: for a file).
    on_lost: Callable[[BaseException], None] | None

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

    def watch(self) -> None:
        """Look at the connection now and then while it is idle, so that `on_lost` is called even
        while nothing is committed (a worker holding a lock that others wait on). Nothing to watch
        for a file."""
        ...

    def close(self) -> None:
        """Close the connection. Idempotent."""
        ...
