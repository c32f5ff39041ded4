"""A PostgreSQL session the server ends while a statement runs on it: the statement fails with
`StorageSessionLostError`, the session is let go, and nothing more is sent on it (a real server)."""

from __future__ import annotations

import threading
import time

import pytest

from aun_runtime import StorageSessionLostError
from aun_runtime.storage import PostgresStorage
from aun_runtime.testing.infrastructure import ExternalPostgres, PostgresServer


def test_a_statement_running_when_the_server_ends_the_session_fails_as_a_lost_session(
    postgres_url: str, postgres_server: ExternalPostgres | PostgresServer
) -> None:
    lost: list[BaseException] = []
    storage = PostgresStorage(postgres_url, on_lost=lost.append)
    failure: list[BaseException] = []

    def sleep_on_it() -> None:
        try:
            storage.fetch("SELECT pg_sleep(30)")
        except BaseException as exc:
            failure.append(exc)

    sleeper = threading.Thread(target=sleep_on_it)
    sleeper.start()
    try:
        deadline = time.monotonic() + 20
        while postgres_server.sql(
            f"SELECT count(*) FROM pg_stat_activity WHERE pid = {storage.backend_pid} AND query LIKE '%pg_sleep%'"
        ).strip() != "1":
            assert time.monotonic() < deadline, "the statement never started"
            time.sleep(0.02)
        assert postgres_server.sql(f"SELECT pg_terminate_backend({storage.backend_pid}, 10000)").strip() == "t"
        sleeper.join(20)
        assert not sleeper.is_alive()
        # The server's notice (admin shutdown) reached the statement: a lost session, not a driver error.
        assert len(failure) == 1 and isinstance(failure[0], StorageSessionLostError), failure
        assert storage.lost is not None and len(lost) == 1
        with pytest.raises(StorageSessionLostError):
            storage.fetch("SELECT 1")  # given up: nothing more goes to the server on it
    finally:
        sleeper.join(20)
        storage.close()


@pytest.mark.parametrize(("chosen", "used"), [("off", "on"), ("local", "local"), ("remote_apply", "remote_apply")])
def test_a_session_commits_durably_whatever_the_database_says_and_keeps_a_stronger_choice(
    postgres_url: str, postgres_server: ExternalPostgres | PostgresServer, chosen: str, used: str
) -> None:
    database = postgres_url.rsplit("/", 1)[1]
    postgres_server.sql(f'ALTER DATABASE "{database}" SET synchronous_commit = {chosen}')
    for read_only in (False, True):
        storage = PostgresStorage(postgres_url, read_only=read_only)
        try:
            assert storage.fetch("SHOW synchronous_commit") == [(used,)]
        finally:
            storage.close()
