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

    # -- the archive ----------------------------------------------------------------------------------

    # -- a worker's journal and outbox ---------------------------------------------------------------

    # -- a service's ledger and liveness -------------------------------------------------------------

    # -- the host's state and election ---------------------------------------------------------------

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
