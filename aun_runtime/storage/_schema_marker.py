"""The mark the runtime leaves in a PostgreSQL database it makes its tables in, and the check of it.

A PostgreSQL database is shared, and made by someone else (the runtime creates tables, never
databases), so it may already hold tables called `messages` or `records` that belong to another
application. The runtime never writes into, nor reads from, such tables. In the transaction that
creates its tables it also writes one row into a table of its own:

```text
aun_runtime_schema
    name        TEXT PRIMARY KEY    -- 'aun-runtime'
    version     INTEGER NOT NULL    -- SCHEMA_VERSION
    created_at  BIGINT NOT NULL     -- ms since the epoch
```

and before creating anything it looks for that row: a database that has it is the runtime's (of a
version it reads, or refused); a database without it that already holds a table, view, sequence or
index by one of the names the runtime would create is refused with a
[`StorageUnavailableError`][aun_runtime.StorageUnavailableError], before anything is created or
changed. A reader (`console`, `transcript`) looks the same way, and never writes the mark.

An SQLite file is the runtime's own file on one machine, and many were made before the mark
existed: it carries no mark. Instead, before anything is created in it (and before a reader reads
it), each table it already holds by one of the runtime's names must have the columns the runtime
gives that table (`aun_runtime.storage.check_sqlite_tables`); another application's `messages` is
refused, untouched.
"""

from __future__ import annotations

import re
import time

from ..base._errors import StorageUnavailableError
from ._protocol import Storage  # not the package: its PostgreSQL dialect imports this module

__all__ = ["MARKER_TABLE", "SCHEMA_NAME", "SCHEMA_VERSION", "claim_schema", "is_marked"]

#: The table that marks a database as the runtime's.
MARKER_TABLE = "aun_runtime_schema"
#: Its row's name.
SCHEMA_NAME = "aun-runtime"
#: The layout of the runtime's tables that this version writes and reads.
SCHEMA_VERSION = 1

_CREATED = re.compile(
    r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TABLE|SEQUENCE|VIEW|INDEX)\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE
)
_MARKER_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {MARKER_TABLE} (
    name TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    created_at BIGINT NOT NULL
);
"""


def _exists(storage: Storage, name: str) -> bool:
    return bool(storage.fetch("SELECT to_regclass(?::text) IS NOT NULL", (name,))[0][0])


def _marked_version(storage: Storage) -> int | None:
    if not _exists(storage, MARKER_TABLE):
        return None
    rows = storage.fetch(f"SELECT version FROM {MARKER_TABLE} WHERE name = ?", (SCHEMA_NAME,))
    return int(rows[0][0]) if rows else None


def _refuse_foreign(storage: Storage, names: list[str]) -> None:
    taken = [name for name in names if _exists(storage, name)]
    if taken:
        raise StorageUnavailableError(
            f"the PostgreSQL database {storage.location} holds {', '.join(taken)}, not made by aun-runtime (it has "
            f"no {MARKER_TABLE} mark): nothing was changed; give the runtime a database of its own "
            "(CREATE DATABASE ...)",
            value=storage.location,
        )


def _check_version(storage: Storage, version: int) -> None:
    if version != SCHEMA_VERSION:
        raise StorageUnavailableError(
            f"the PostgreSQL database {storage.location} holds aun-runtime tables of schema version {version}; "
            f"this aun-runtime reads version {SCHEMA_VERSION}: run the aun-runtime that made them, or give this "
            "one a database of its own",
            value=storage.location,
        )


def claim_schema(storage: Storage, schema: str) -> None:
    """Before the statements of `schema` create anything, in their transaction: refuse a database
    whose objects by those names are not the runtime's, and mark it the runtime's otherwise.

    Raises:
        StorageUnavailableError: the database holds such objects without the mark, or the mark of
            another schema version.
    """
    version = _marked_version(storage)
    if version is not None:
        _check_version(storage, version)
        return
    _refuse_foreign(storage, [*_CREATED.findall(schema), MARKER_TABLE])
    storage.script(_MARKER_SCHEMA)
    storage.execute(
        f"INSERT INTO {MARKER_TABLE} (name, version, created_at) VALUES (?, ?, ?)",
        (SCHEMA_NAME, SCHEMA_VERSION, int(time.time() * 1000)),
    )


def is_marked(storage: Storage, schema: str) -> bool:
    """For a reader: whether the runtime has made its tables here (False: nothing yet).

    Raises:
        StorageUnavailableError: the database holds objects by the names of `schema` that are not
            the runtime's, or the runtime's of another schema version.
    """
    version = _marked_version(storage)
    if version is None:
        _refuse_foreign(storage, _CREATED.findall(schema))
        return False
    _check_version(storage, version)
    return True

