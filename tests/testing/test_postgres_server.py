"""The test run's throwaway PostgreSQL server: real, private to each test, and gone afterwards."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import textwrap
from pathlib import Path

from aun_runtime.testing._postgres import DIRECTORY_PREFIX, remove_leftovers
from aun_runtime.testing.infrastructure import ExternalPostgres, PostgresServer

ROOT = Path(__file__).resolve().parents[2]


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: where nobody reaps orphans, a stopped server stays one)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def _tables(server: ExternalPostgres | PostgresServer, url: str) -> list[str]:
    database = url.rsplit("/", 1)[1]
    return ExternalPostgres(server.url(database)).sql("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").split()


def test_each_test_gets_a_database_of_its_own(postgres_server: ExternalPostgres | PostgresServer, postgres_url: str) -> None:
    mine = ExternalPostgres(postgres_url)
    mine.sql("CREATE TABLE kept (n integer)")
    mine.sql("INSERT INTO kept VALUES (1), (2)")
    assert mine.sql("SELECT sum(n) FROM kept").strip() == "3"
    other = postgres_server.create_database()
    try:
        assert _tables(postgres_server, other) == []  # a fresh database knows nothing of this test's
        assert _tables(postgres_server, postgres_url) == ["kept"]
    finally:
        postgres_server.drop_database(other.rsplit("/", 1)[1])
    names = postgres_server.sql("SELECT datname FROM pg_database").split()
    assert postgres_url.rsplit("/", 1)[1] in names and other.rsplit("/", 1)[1] not in names


def test_a_server_runs_unprivileged_and_is_removed_when_stopped() -> None:
    server = PostgresServer().start()
    directory = server.directory
    assert directory is not None and directory.name.startswith(DIRECTORY_PREFIX)
    pid = int((server.data_dir / "postmaster.pid").read_text().split()[0])
    owner = pwd.getpwuid(os.stat(f"/proc/{pid}").st_uid).pw_name
    if os.geteuid() == 0:
        assert owner != "root"  # initdb and pg_ctl refuse root: the server runs as postgres
    assert ExternalPostgres(server.url()).sql("SELECT 1").strip() == "1"  # over TCP, by its URL
    server.stop()
    assert not directory.exists()
    assert not _running(pid)
    server.stop()  # again: nothing to do


def test_the_server_of_a_killed_process_is_stopped_and_removed_by_the_next_start(tmp_path: Path) -> None:
    # A process starts a server, says where, and is killed before it can stop it.
    script = textwrap.dedent("""
        import sys, time
        from aun_runtime.testing.infrastructure import PostgresServer
        server = PostgresServer().start()
        print(server.directory, flush=True)
        time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        directory = Path(child.stdout.readline().strip())
        pid = int((directory / "data" / "postmaster.pid").read_text().split()[0])
    finally:
        child.kill()
        child.wait()
    assert directory.exists() and _running(pid)  # left behind, still serving
    assert directory in remove_leftovers()
    assert not directory.exists() and not _running(pid)


def test_under_xdist_the_workers_share_one_server_that_the_run_stops(tmp_path: Path) -> None:
    # Two workers each make a database and print which server they used; the run's server is gone after.
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["aun_runtime.testing.pytest_plugin"]\n')
    log = tmp_path / "used.log"
    (tmp_path / "test_two.py").write_text(textwrap.dedent(f"""
        import os, pytest
        @pytest.mark.parametrize("n", range(4))
        def test_database(postgres_url, n, worker_id):
            with open({str(log)!r}, "a") as log:
                log.write(f"{{worker_id}} {{os.environ['AUN_TEST_POSTGRES_URL']}} {{postgres_url}}\\n")
    """))
    env = {k: v for k, v in os.environ.items() if k != "AUN_TEST_POSTGRES_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-q", str(tmp_path), "--rootdir", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    used = [line.split() for line in log.read_text().splitlines()]
    assert len(used) == 4 and {worker for worker, _, _ in used} == {"gw0", "gw1"}
    [server] = {server for _, server, _ in used}
    assert len({database for _, _, database in used}) == 4  # each test its own database
    port = server.rsplit(":", 1)[1].split("/")[0]
    check = subprocess.run([sys.executable, "-c", f"import socket; socket.create_connection(('127.0.0.1', {port}), 2)"])
    assert check.returncode != 0  # the run's server was stopped with the run
