"""A configuration error is one line on stderr and exit 2, in every command, with nothing created or
changed in the database; a runtime failure is one line and exit 1; only a bug shows a traceback.

Real processes of the `aun-runtime` command, a real PostgreSQL server (the test run's, and for the
password case one of this module's own that asks for passwords), real files, FIFOs and devices.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg  # type: ignore[import-untyped]
import pytest

from aun_runtime import ConfigurationError, StorageSessionLostError
from aun_runtime.distributed._host_state import MAX_STATE_BYTES
from aun_runtime.operating._command_errors import report_errors
from aun_runtime.testing.infrastructure import ExternalPostgres, PostgresServer

ROOT = Path(__file__).resolve().parents[2]
#: Seconds a refused command may take: it starts Python and asks the server once.
TIMEOUT = 60
PASSWORD = "hunter2-" + secrets.token_hex(4)
WRONG = "wrong-" + secrets.token_hex(4)


def _command(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aun_runtime", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout
    )


def _refused(done: subprocess.CompletedProcess[str], *, said: str, secret: str | None = None) -> str:
    """Assert the command was refused as a configuration error; its one line."""
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert lines[0].startswith("error: ") and said in lines[0], lines[0]
    if secret is not None:
        assert secret not in done.stdout + done.stderr
    return lines[0]


def _with(url: str, *, netloc: str | None = None, path: str | None = None, query: str | None = None) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, netloc or parts.netloc, path or parts.path, query or parts.query, ""))


async def _fetch(url: str, sql: str, *args: object) -> list[tuple[object, ...]]:
    connection = await asyncpg.connect(url, timeout=10)
    try:
        return [tuple(row) for row in await connection.fetch(sql, *args)]
    finally:
        await connection.close()


def _objects(url: str) -> list[str]:
    """Every table, view, sequence and index of the database's public schema."""
    rows = asyncio.run(_fetch(url, "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                   "WHERE n.nspname = 'public' ORDER BY relname"))
    return [str(row[0]) for row in rows]


@pytest.fixture(scope="module")
def password_server() -> Iterator[PostgresServer]:
    """A server of this module's own whose role `secret` must give its password (the run's server
    trusts every local connection, so there a wrong password would get in)."""
    with PostgresServer() as server:
        server.sql(f"CREATE ROLE secret LOGIN PASSWORD '{PASSWORD}'")
        server.sql("CREATE DATABASE guarded OWNER secret")
        hba = server.data_dir / "pg_hba.conf"
        hba.write_text("host all secret 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        server.sql("SELECT pg_reload_conf()")
        yield server


# -- PostgreSQL: refused before anything is created ---------------------------------------------------------


def test_a_wrong_password_is_one_line_with_the_password_hidden(password_server: PostgresServer) -> None:
    good = f"postgresql://secret:{PASSWORD}@127.0.0.1:{password_server.port}/guarded"
    url = _with(good, netloc=f"secret:{WRONG}@127.0.0.1:{password_server.port}")
    line = _refused(_command("run", "agents.demo:app", "--until-idle", "--archive", url),
                    said="password authentication failed", secret=WRONG)
    assert line.startswith("error: --archive: ") and "secret:***@" in line and "correct the password" in line
    assert _objects(good) == []  # nothing was created


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"port": "1"}, "start the server, or correct the host and port"),
        ({"port": "99999"}, "give a port from 1 to 65535"),
        ({"user": "nobody_" + secrets.token_hex(3)}, "does not exist: correct the user in the URL"),
        ({"query": "sslmode=require"}, "does not offer TLS"),
    ],
    ids=["port 1", "port 99999", "no such role", "sslmode=require without TLS"],
)
def test_a_url_the_server_cannot_serve_is_one_line_and_nothing_is_created(
    postgres_url: str, change: dict[str, str], said: str
) -> None:
    parts = urlsplit(postgres_url)
    netloc = f"{change.get('user', parts.username)}@{parts.hostname}:{change.get('port', parts.port)}"
    url = _with(postgres_url, netloc=netloc, query=change.get("query"))
    # `run` waits for a database that does not answer (port 1) up to its connect timeout, as a
    # command started beside its database must; 0 asks it not to wait, so the refusal comes at once.
    command = _command("run", "agents.demo:app", "--until-idle", "--connect-timeout", "0", "--archive", url)
    line = _refused(command, said=said)
    assert line.startswith("error: --archive: cannot open the PostgreSQL database")
    assert _objects(postgres_url) == []


def _missing_database(postgres_server: ExternalPostgres | PostgresServer) -> tuple[str, str]:
    name = f"aun_missing_{secrets.token_hex(4)}"
    return name, postgres_server.url(name)


def _database_exists(postgres_server: ExternalPostgres | PostgresServer, name: str) -> bool:
    return bool(asyncio.run(_fetch(postgres_server.url("postgres"), "SELECT 1 FROM pg_database WHERE datname = $1", name)))


@pytest.mark.parametrize(
    "command",
    [
        ["run", "agents.demo:app", "--until-idle"],
        ["transcript"],
        ["transcript", "--follow"],
        ["console", "--port", "0"],
        ["worker", "--app", "agents.demo:app", "--name", "w1", "--connect-timeout", "1"],
    ],
    ids=["run", "transcript", "transcript --follow", "console", "worker"],
)
def test_a_database_that_does_not_exist_is_refused_and_never_created(
    postgres_server: ExternalPostgres | PostgresServer, command: list[str]
) -> None:
    name, url = _missing_database(postgres_server)
    _refused(_command(*command, "--archive", url), said=f'database "{name}" does not exist')
    assert not _database_exists(postgres_server, name)


def test_a_database_whose_tables_are_not_ours_is_refused_by_our_mark_untouched(postgres_url: str) -> None:
    asyncio.run(_fetch(postgres_url, "CREATE TABLE messages (x INTEGER)"))
    asyncio.run(_fetch(postgres_url, "CREATE TABLE records (y TEXT)"))
    asyncio.run(_fetch(postgres_url, "INSERT INTO messages VALUES (7)"))
    for command in (["run", "agents.demo:app", "--until-idle"], ["transcript"], ["console", "--port", "0"]):
        line = _refused(_command(*command, "--archive", postgres_url), said="not made by aun-runtime")
        assert "messages, records" in line and "aun_runtime_schema" in line
    assert _objects(postgres_url) == ["messages", "records"]  # no table, view, sequence or mark added
    assert asyncio.run(_fetch(postgres_url, "SELECT x FROM messages")) == [(7,)]


def test_a_database_the_runtime_made_carries_its_mark_and_is_used_again(postgres_url: str) -> None:
    first = _command("run", "agents.demo:app", "--until-idle", "--archive", postgres_url)
    assert first.returncode == 0, first.stderr
    assert asyncio.run(_fetch(postgres_url, "SELECT name, version FROM aun_runtime_schema")) == [("aun-runtime", 1)]
    again = _command("transcript", "--archive", postgres_url)
    assert again.returncode == 0 and "alice.local" in again.stdout, again.stderr


def test_a_database_marked_with_another_schema_version_is_refused(postgres_url: str) -> None:
    asyncio.run(_fetch(postgres_url, "CREATE TABLE aun_runtime_schema (name TEXT PRIMARY KEY, version INTEGER NOT NULL, "
                                     "created_at BIGINT NOT NULL)"))
    asyncio.run(_fetch(postgres_url, "INSERT INTO aun_runtime_schema VALUES ('aun-runtime', 2, 0)"))
    _refused(_command("run", "agents.demo:app", "--until-idle", "--archive", postgres_url),
             said="holds aun-runtime tables of schema version 2; this aun-runtime reads version 1")
    assert _objects(postgres_url) == ["aun_runtime_schema", "aun_runtime_schema_pkey"]


def test_debug_shows_the_traceback_of_a_configuration_error(postgres_server: ExternalPostgres | PostgresServer) -> None:
    _, url = _missing_database(postgres_server)
    done = _command("run", "agents.demo:app", "--until-idle", "--archive", url, "--debug")
    assert done.returncode == 2
    assert "Traceback" in done.stderr and "StorageUnavailableError" in done.stderr
    assert done.stderr.splitlines()[-1].startswith("error: --archive: ")


# -- files read as configuration ------------------------------------------------------------------------------


def _host_state_refused(state: Path, said: str) -> None:
    _refused(_command("host", "--address", "127.0.0.1:0", "--state", str(state)), said=f"--state: {state} {said}")
    assert not Path(f"{state}.lock").exists()  # nothing made beside it


def test_host_state_must_be_a_regular_file(tmp_path: Path) -> None:
    directory = tmp_path / "a-directory"
    directory.mkdir()
    _host_state_refused(directory, "is a directory, not a regular file")
    fifo = tmp_path / "a-fifo"
    os.mkfifo(fifo)
    _host_state_refused(fifo, "is a FIFO, not a regular file")  # never opened: a FIFO would block it
    _host_state_refused(Path("/dev/full"), "is a character device, not a regular file")


def test_host_state_is_bounded_in_size(tmp_path: Path) -> None:
    huge = tmp_path / "huge.state"
    with open(huge, "wb") as file:
        file.truncate(MAX_STATE_BYTES + 1)  # sparse: no disk used
    _host_state_refused(huge, f"holds {MAX_STATE_BYTES + 1} bytes, more than a host state file may")


def test_a_reader_never_creates_an_sqlite_archive(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-directory" / "archive.sqlite"
    for command in (["transcript"], ["transcript", "--follow"]):
        _refused(_command(*command, "--archive", str(missing)), said=f"no archive file at {missing}")
    assert not missing.parent.exists()


def test_an_sqlite_archive_that_is_no_file_of_ours_is_refused_untouched(tmp_path: Path) -> None:
    directory = tmp_path / "a-directory"
    directory.mkdir()
    text = tmp_path / "notes.txt"
    text.write_text("not a database")
    foreign = tmp_path / "other-app.sqlite"
    with contextlib.closing(sqlite3.connect(foreign)) as db:
        db.execute("CREATE TABLE messages (x INTEGER)")
        db.execute("INSERT INTO messages VALUES (7)")
        db.commit()
    before = foreign.read_bytes()
    cases = [(directory, "is no regular file"), (Path("/dev/full"), "is no regular file"),
             (text, "is no SQLite database"), (foreign, "holds messages, not made by aun-runtime")]
    for path, said in cases:
        line = _refused(_command("run", "agents.demo:app", "--until-idle", "--archive", str(path)), said=said)
        assert line.startswith("error: --archive: ")
    for path, said in cases[2:]:
        _refused(_command("transcript", "--archive", str(path)), said=said)
    assert text.read_text() == "not a database" and foreign.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-directory", "notes.txt", "other-app.sqlite"]  # no -wal


def test_gateway_data_that_is_no_directory_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "a-file"
    data.write_text("not a directory")
    _refused(_command("gateway", "--port", "0", "--data", str(data / "inside")), said="--data: cannot use data directory")
    assert data.read_text() == "not a directory"


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["host", "--address", "127.0.0.1:99999"], "argument --address: 99999 is not a port number"),
        (["console", "--archive", "a.sqlite", "--port", "99999"], "argument --port: 99999 is not a port number"),
        (["gateway", "--port", "99999"], "argument --port: 99999 is not a port number"),
        (["status", "--host", "no-port"], "argument --host: 'no-port' is not host:port"),
        (["run", "agents.demo:app", "--no-such-option"], "unrecognized arguments: --no-such-option"),
        (["host", "--address", "127.0.0.1:0", "--tls-cert", "/no/cert.pem", "--tls-key", "/no/key.pem"],
         "--tls-key: cannot read the PEM file /no/key.pem"),
        (["worker", "--app", "agents.demo:app", "--tls-ca", "/no/ca.pem", "--connect-timeout", "1"],
         "--tls-ca: cannot read the PEM file /no/ca.pem"),
        (["status", "--tls-ca", "/no/ca.pem"], "--tls-ca: cannot read the PEM file /no/ca.pem"),
    ],
    ids=["host port", "console port", "gateway port", "status address", "unknown option", "host TLS", "worker TLS",
         "status TLS"],
)
def test_ports_addresses_and_files_are_checked_before_anything_serves(
    tmp_path: Path, command: list[str], said: str
) -> None:
    # A port past 65535 is not wrapped around (99999 would serve on 34463), nor a missing PEM file
    # found only when the first connection is tried.
    done = subprocess.run([sys.executable, "-m", "aun_runtime", *command], capture_output=True, text=True,
                          cwd=tmp_path, timeout=TIMEOUT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    _refused(done, said=said)
    assert done.stdout == ""  # nothing served, not even for a moment


# -- a runtime failure, and a bug --------------------------------------------------------------------------------


def test_a_database_lost_mid_run_ends_in_one_line_and_exit_1(
    postgres_server: ExternalPostgres | PostgresServer, postgres_url: str
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "aun_runtime", "run", "tests.commands.apps:clock", "--for", "30", "--archive", postgres_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        seen = ""
        while "tick 2" not in seen:  # running, and writing its archive
            line = process.stdout.readline()
            assert line, f"the run ended by itself: {seen}"
            seen += line
        database = urlsplit(postgres_url).path.lstrip("/")
        ended = asyncio.run(_fetch(postgres_server.url("postgres"), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                   "WHERE datname = $1 AND application_name = 'aun-runtime'", database))
        assert ended and all(row == (True,) for row in ended)
        _, err = process.communicate(timeout=TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
            process.wait()
    assert process.returncode == 1, err
    assert "Traceback" not in err
    said = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(said) == 1 and said[0] == err.splitlines()[-1], err
    assert "session" in said[0] and database in said[0]


def _raises(error: BaseException) -> int:
    raise error


@pytest.mark.parametrize(
    ("error", "code", "traceback_shown"),
    [
        (ConfigurationError("the setting is wrong: change it", value="x.state"), 2, False),
        (StorageSessionLostError("the session with postgresql://u:pw@h/db has ended"), 1, False),
        (KeyError("a bug"), 1, True),
    ],
    ids=["configuration", "runtime failure", "bug"],
)
def test_each_kind_of_failure_reads_and_exits_its_own_way(
    capsys: pytest.CaptureFixture[str], error: BaseException, code: int, traceback_shown: bool
) -> None:
    assert report_errors(lambda: _raises(error), options={"--state": ["x.state"]}) == code
    err = capsys.readouterr().err
    assert ("Traceback" in err) is traceback_shown
    assert err.splitlines()[-1].startswith("error: ")
    assert "pw@" not in err  # a password is never shown, whoever raised it
    if not traceback_shown:
        assert len(err.splitlines()) == 1
    if code == 2:
        assert err == "error: --state: the setting is wrong: change it\n"
    assert report_errors(lambda: _raises(error), debug=True) == code
    assert "Traceback" in capsys.readouterr().err  # --debug shows it for every kind

