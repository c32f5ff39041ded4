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
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from ._scoped_sql import ScopedSQL

__all__ = ["Dialect", "Row", "Storage", "StorageKind"]

StorageKind = Literal["sqlite", "postgresql"]
Row = tuple[Any, ...]


class Dialect(Protocol):
    """What differs between the databases a `Storage` may talk to, said once per database."""

    #: The database's name, for messages (`"sqlite"`, `"postgresql"`): never a reason to branch.
    name: StorageKind

    # -- any store ----------------------------------------------------------------------------------

    def is_missing_table(self, error: BaseException) -> bool:
        """Whether `error`, raised by this database, says a table does not exist (yet)."""
        ...

    def scoped(self, column: str, value: str) -> ScopedSQL:
        """Statements for tables one owner keeps: where one database holds several owners' rows
        (a shared server), its tables start with the owner's `column`; where it holds one owner's
        (a file of its own), they do not."""
        ...

    # -- the archive (`aun_runtime._archive_sql`) -----------------------------------------------------

    #: Message row numbers an archive takes at a time from `archive_message_rows`, where several
    #: archives write one database (0: the database has one writer, which numbers them itself).
    archive_row_block: int
    #: Whether one `archive_insert_batch` may run alone, as its own transaction (else the archive
    #: opens one around it).
    archive_batch_alone: bool

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

    # -- a worker's journal and outbox ---------------------------------------------------------------

    # -- a service's ledger and liveness -------------------------------------------------------------

    # -- the host's state and election ---------------------------------------------------------------

    # -- agent state, checkpoint, the gateway's store, the network outbox ----------------------------


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
