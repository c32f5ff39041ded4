"""The one place that maps a location to a database: a `postgresql://` (or `postgres://`) URL is a
PostgreSQL server, anything else an SQLite file. A new database adds its location here, and its
dialect to `DIALECTS`.
"""

from __future__ import annotations

from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import Final

from ._postgres import POSTGRESQL, PostgresStorage, redacted_url
from ._protocol import Dialect, Storage
from ._sqlite import SQLITE, SQLiteStorage

__all__ = [
    "DIALECTS", "POSTGRES_SCHEMES", "create_tables", "dialect_for", "is_missing_table", "is_postgres_url", "open_storage",
]

#: URL schemes that name a PostgreSQL server (libpq accepts both).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
#: Every database the runtime can keep its stores in.
DIALECTS: Final[tuple[Dialect, ...]] = (SQLITE, POSTGRESQL)


def is_postgres_url(location: str | Path) -> bool:
    """Whether `location` names a PostgreSQL server rather than an SQLite file."""
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


def dialect_for(location: str | Path) -> Dialect:
    """The dialect of the database at `location`, without opening it (to check what is asked of a
    location before anything is opened there)."""
    return POSTGRESQL if is_postgres_url(location) else SQLITE


def as_location(source: str | PathLike[str]) -> str | Path:
    """`source` as a location `open_storage` takes: a server's URL stays a string (a `Path` would fold
    its `//`), anything else is a file's path."""
    return source if isinstance(source, str) and is_postgres_url(source) else Path(source)


def shown_location(location: str | Path) -> str:
    """`location` as a message may show it: a server's URL without its password, a file's path as is."""
    return redacted_url(location) if isinstance(location, str) and is_postgres_url(location) else str(location)


def is_missing_table(error: BaseException) -> bool:
    """Whether `error` says a table does not exist (yet): a reader ahead of the writer that makes it."""
    return any(dialect.is_missing_table(error) for dialect in DIALECTS)


def open_storage(
    location: str | Path,
    *,
    read_only: bool = False,
    tables: Callable[[Dialect], str] | None = None,
    on_lost: Callable[[BaseException], None] | None = None,
) -> Storage:
    """The storage at `location`: a PostgreSQL server for a `postgresql://` URL, else an SQLite file
    (checked against the tables its user keeps there, `tables(SQLITE)`, before it is written to:
    see `SQLiteStorage`). `on_lost` is called once when a server's session ends unasked (see
    `Storage.on_lost`).

    Raises:
        FileNotFoundError: `read_only` and there is no SQLite file at `location`.
        StorageUnavailableError: the PostgreSQL server cannot be reached or refuses the connection.
    """
    if is_postgres_url(location):
        return PostgresStorage(str(location), read_only=read_only, on_lost=on_lost)
    return SQLiteStorage(location, read_only=read_only, tables=None if tables is None else tables(SQLITE))


def create_tables(storage: Storage, sqlite_schema: str, postgres_schema: str) -> None:
    """Create an owner's tables (if missing) from the definitions it keeps for each database itself
    (see `Dialect.create_tables`); an owner whose dialect members hold them calls that instead."""
    storage.dialect.create_tables(storage, sqlite_schema if storage.dialect is SQLITE else postgres_schema)
