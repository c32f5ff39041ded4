"""The archive's tables as each database's dialect defines them: the same tables, columns and view.

A reader (a console, `transcript --merge`) reads an SQLite archive and a PostgreSQL one with the same
statements (`aun_runtime.storage._archive_sql`), so a column that one dialect's tables gain and another's
lack would break reads on one database only, where the tests of the other cannot see it.
"""

from __future__ import annotations

import re

from aun_runtime.storage import DIALECTS
from aun_runtime.storage._archive_sql import ARCHIVE_VIEW, archive_tables

_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+) \((.*?)\n\);", re.S)


def _columns(schema: str) -> dict[str, list[str]]:
    """Each table's column names, in order (constraint lines left out)."""
    return {
        name: [line.split()[0] for line in body.strip().splitlines() if not line.strip().startswith("PRIMARY KEY")]
        for name, body in _TABLE.findall(schema)
    }


def test_every_database_defines_the_same_archive_tables_columns_and_view() -> None:
    schemas = {dialect.name: archive_tables(dialect) for dialect in DIALECTS}
    columns = {name: _columns(schema) for name, schema in schemas.items()}
    assert set(columns) == {"sqlite", "postgresql"}
    assert columns["sqlite"] == {
        "messages": ["id", "message_id", "from_aid", "to_aid", "group_id", "thread", "in_reply_to", "created_at", "body"],
        "records": ["id", "owner", "kind", "reason", "message", "text", "recorded_at"],
        "agents": ["aid", "role", "mode", "description", "card", "registered_at"],
    }
    assert all(found == columns["sqlite"] for found in columns.values())
    assert all(ARCHIVE_VIEW in schema for schema in schemas.values())


def test_a_database_whose_archive_rows_come_in_blocks_cannot_insert_a_batch_alone() -> None:
    # Where several archives write one database, each batch insert takes the lock that orders their
    # records, which holds only inside a transaction: the archive opens one around it.
    for dialect in DIALECTS:
        assert dialect.archive_row_block >= 0
        if dialect.archive_row_block:
            assert not dialect.archive_batch_alone, dialect.name
