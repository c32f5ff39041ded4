"""The tables of the stores that keep one process's rows (agent states, the network outbox), as each
database's dialect defines them: made again without harm, their columns listed by the dialect, and
the agent state store's upsert replacing a row on every database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aun_runtime.storage import Storage, open_storage
from aun_runtime.storage._sqlite_state import _UPSERT

DATABASES = ["sqlite", "postgresql"]


@pytest.fixture(params=DATABASES)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    location = tmp_path / "store.sqlite" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    opened = open_storage(location)
    yield opened
    opened.close()


def test_each_dialect_makes_the_tables_and_lists_their_columns(storage: Storage) -> None:
    dialect = storage.dialect
    assert dialect.columns(storage, "outbox") == set()  # not there yet
    for _ in range(2):  # every open runs them: the second time changes nothing
        storage.script(dialect.agent_states_table)
        storage.script(dialect.outbox_table)
    assert dialect.columns(storage, "agent_states") == {"agent_type", "agent_key", "state"}
    assert dialect.columns(storage, "outbox") == {"id", "sender", "recipient", "body", "enqueued_at", "trace"}


def test_the_agent_state_upsert_replaces_the_row_of_its_agent(storage: Storage) -> None:
    storage.script(storage.dialect.agent_states_table)
    with storage.transaction():
        storage.executemany(_UPSERT, [("a.local", "default", '{"n":1}'), ("b.local", "default", '{"n":2}')])
    with storage.transaction():
        storage.executemany(_UPSERT, [("a.local", "default", '{"n":3}')])
    rows = storage.fetch("SELECT agent_type, state FROM agent_states ORDER BY agent_type")
    assert [tuple(row) for row in rows] == [("a.local", '{"n":3}'), ("b.local", '{"n":2}')]
