"""pytest fixtures for tests that need PostgreSQL or network namespaces.

They hand out the infrastructure of [`aun_runtime.testing.infrastructure`][aun_runtime.testing.infrastructure]
(real servers and namespaces: see there what each needs on the machine).

Load it from the `conftest.py` at the top of a test suite:

```text
pytest_plugins = ["aun_runtime.testing.pytest_plugin"]
```

**PostgreSQL.** `postgres_url` gives each test a fresh, empty database and drops it afterwards.
The databases live on one server per test run:

* `AUN_TEST_POSTGRES_URL` set: that server (a real one, or the run's own, below), as the URL's user,
  who must be allowed to create databases;
* otherwise, under pytest-xdist (`-n`), the controlling process starts a throwaway server
  (`PostgresServer`, with `RUN_SERVER_SETTINGS`) before the workers start, hands it to them in
  `AUN_TEST_POSTGRES_URL`, and stops it when the run ends;
* otherwise (one process), the first test that asks starts one, stopped at the end of the session.

**Network namespaces.** `private_network` gives a test a
`PrivateNetwork`, removed afterwards. Where namespaces cannot be made
(not root, no `ip`), such a test is reported as not run, with the reason, at the end of the run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from .infrastructure import ExternalPostgres, PostgresServer, PrivateNetwork, namespaces_unavailable

__all__ = ["NOT_RUN", "POSTGRES_URL_VARIABLE", "RUN_SERVER_SETTINGS", "postgres_server", "postgres_url", "private_network"]

#: The environment variable that names the test run's PostgreSQL server (a superuser's URL).
POSTGRES_URL_VARIABLE = "AUN_TEST_POSTGRES_URL"
#: How a namespace test that cannot run says why: its skip message starts with this.
NOT_RUN = "not run across network namespaces: "
#: The settings of the server the plugin starts: the common tuning under which the runtime's sessions
#: must still commit durably (they set it back for themselves), so that every test runs under it.
RUN_SERVER_SETTINGS = {"synchronous_commit": "off"}
_RUN_SERVER = pytest.StashKey[PostgresServer]()
#: Namespace tests reported as not run in this process, by reason.
_not_run: dict[str, int] = {}


def pytest_configure(config: pytest.Config) -> None:
    if POSTGRES_URL_VARIABLE in os.environ or hasattr(config, "workerinput"):
        return  # a server is named already, or this is an xdist worker: its controller started one
    try:
        parallel = config.getoption("numprocesses")
    except ValueError:  # pytest-xdist is not installed, or was disabled (-p no:xdist)
        parallel = None
    if parallel:
        server = config.stash[_RUN_SERVER] = PostgresServer(settings=RUN_SERVER_SETTINGS).start()
        os.environ[POSTGRES_URL_VARIABLE] = server.url()


def pytest_unconfigure(config: pytest.Config) -> None:
    server = config.stash.get(_RUN_SERVER, None)
    if server is not None:
        os.environ.pop(POSTGRES_URL_VARIABLE, None)
        server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[ExternalPostgres | PostgresServer]:
    """The test run's PostgreSQL server (see the module docstring for which one)."""
    named = os.environ.get(POSTGRES_URL_VARIABLE)
    if named:
        yield ExternalPostgres(named)
        return
    with PostgresServer(settings=RUN_SERVER_SETTINGS) as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: ExternalPostgres | PostgresServer) -> Iterator[str]:
    """The URL of a fresh, empty database of its own for this test, dropped after it."""
    url = postgres_server.create_database()
    yield url
    postgres_server.drop_database(urlsplit(url).path.lstrip("/"))


@pytest.fixture
def private_network() -> Iterator[PrivateNetwork]:
    """Network namespaces joined by a bridge, for this test only; everything removed afterwards."""
    reason = namespaces_unavailable()
    if reason is not None:
        pytest.skip(NOT_RUN + reason)
    with PrivateNetwork() as network:
        yield network


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Reports reach the controlling process under xdist too, so the reasons are counted where the
    # summary is written.
    if report.skipped and isinstance(report.longrepr, tuple):
        message = str(report.longrepr[2]).removeprefix("Skipped: ")
        if message.startswith(NOT_RUN):
            reason = message[len(NOT_RUN) :]
            counts = _not_run.setdefault(reason, 0)
            _not_run[reason] = counts + 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for reason, count in _not_run.items():
        terminalreporter.write_line(f"{count} test(s) {NOT_RUN}{reason}", yellow=True)
