"""Shared fixtures and the suite's running order. Runtime kinds are listed in tests/conformance/conftest.py.

The files in `SLOW_FILES` take seconds each (real processes, a browser, notebooks, a thousand
clients): they carry the `slow` marker, so `pytest -m "not slow"` is the quick run, and they are
started first, longest first, so that spread over several workers (`make test` runs pytest-xdist with
`--dist loadfile`) the long ones do not come last and leave the other workers idle. A run that has
the cache plugin records each file's time, and the next run orders by that instead.

`postgres_url` (a fresh database on the run's own PostgreSQL server) and `private_network`
(network namespaces) come from the runtime's pytest plugin.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from .progress import FileProgress

pytest_plugins = ["aun_runtime.testing.pytest_plugin"]

#: Test files that take seconds (about 5 s or more each on a quiet two-core machine), longest first.
SLOW_FILES = (
    "tests/network/test_many_aids.py",
    "tests/distributed/test_operating_cli.py",
    "tests/distributed/test_json_logs.py",
    "tests/distributed/test_prometheus_scrape.py",
    "tests/distributed/test_otel_environment.py",
    "tests/distributed/test_deploy_topology.py",
    "tests/commands/test_environment_options.py",
    "tests/distributed/test_service_aids.py",
    "tests/distributed/test_crash_durability.py",
    "tests/distributed/test_frozen_instance.py",
    "tests/distributed/test_blocked_loop.py",
    "tests/distributed/test_heartbeat.py",
    "tests/distributed/test_standby_host.py",
    "tests/distributed/test_failover_all.py",
    "tests/distributed/test_host_election.py",
    "tests/distributed/test_cluster.py",
    "tests/test_instruction_gate.py",
    "tests/notebooks/test_notebooks_always_answering.py",
    "tests/notebooks/test_notebooks.py",
    "tests/gateway/test_wire_limits.py",
    "tests/network/test_slow_first_login.py",
    "tests/network/test_outages.py",
    "tests/distributed/test_host_security.py",
    "tests/testing/test_postgres_server.py",
    "tests/distributed/test_host_state.py",
    "tests/distributed/test_across_namespaces.py",
    "tests/distributed/test_postgres_workers.py",
    "tests/distributed/test_docs_several_machines.py",
    "tests/testing/test_private_network.py",
    "tests/agents/test_model_shapes.py",
    "tests/agents/test_model_storm.py",
    "tests/agents/test_model_anomalies.py",
    "tests/agents/test_pattern_retries.py",
    "tests/distributed/test_worker_redrive_processes.py",
    "tests/agents/test_turn_retry.py",
    "tests/agents/test_redrive.py",
    "tests/agents/test_busy.py",
    "tests/gateway/test_delivery_mode.py",
    "tests/console/test_browser.py",
    "tests/network/test_queue_members.py",
    "tests/gateway/test_client_group_e2ee.py",
    "tests/commands/test_config_errors.py",
    "tests/commands/test_run.py",
    "tests/distributed/test_host_rules.py",
    "tests/distributed/test_merged_transcript.py",
    "tests/transcripts/test_reconnect.py",
    "tests/gateway/test_frame_fuzz.py",
    "tests/test_type_checking_outside.py",
    "tests/agents/test_agentchat.py",
    "tests/agents/test_agentchat_terminal.py",
    "tests/console/test_cli.py",
    "tests/test_docs_site.py",
    "tests/test_docs_human.py",
    "tests/commands/test_reused_archive.py",
)
#: Health checks about the machine's speed, not the code's: on a loaded machine (a suite spread over
#: its cores, other work beside it) hypothesis draws its inputs slowly. Tests that set their own
#: health checks add these.
SLOW_MACHINE = (HealthCheck.too_slow,)
settings.register_profile("aun", suppress_health_check=SLOW_MACHINE)
settings.load_profile("aun")
#: Where the cache plugin keeps each file's seconds from the last run.
FILE_SECONDS_KEY = "aun_runtime/file_seconds"
ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes seconds (processes, a browser, notebooks); see tests/conftest.py")
    # Lines by file replace the dots, at the default verbosity; `-v` keeps pytest's own line per test.
    if config.get_verbosity() <= 0 and not hasattr(config, "workerinput"):
        config.pluginmanager.register(FileProgress(config, FILE_SECONDS_KEY), "aun-file-progress")


def _file_of(item: pytest.Item) -> str:
    return item.path.resolve().relative_to(ROOT).as_posix() if item.path.is_relative_to(ROOT) else str(item.path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = {path: len(SLOW_FILES) - rank for rank, path in enumerate(SLOW_FILES)}
    cache = getattr(config, "cache", None)
    last: dict[str, float] = cache.get(FILE_SECONDS_KEY, {}) if cache is not None else {}
    for item in items:
        if _file_of(item) in slow:
            item.add_marker(pytest.mark.slow)

    def order(item: pytest.Item) -> tuple[float, int]:
        path = _file_of(item)
        # Every worker sorts the same items by the same numbers: the order is the same in each.
        return (-last[path], 0) if path in last else (0.0, -slow.get(path, 0))

    items.sort(key=order)  # stable: within a file (and among quick files) the collected order stays


class Stores:
    """Where a test keeps its archives and journals: SQLite files, or PostgreSQL databases.

    `store("a")` is the location of the store named `a`: the same location each time it is asked
    for (a reopened archive), a different one for another name (a second worker's).
    """

    def __init__(self, kind: str, directory: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self._directory = directory
        self._request = request
        self._made: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        if name not in self._made:
            if self.kind == "sqlite":
                self._made[name] = str(self._directory / f"{name}.sqlite")
            else:
                server = self._request.getfixturevalue("postgres_server")
                self._made[name] = server.create_database()
        return self._made[name]

    def drop(self) -> None:
        if self.kind == "postgresql":
            from urllib.parse import urlsplit

            server = self._request.getfixturevalue("postgres_server")
            for url in self._made.values():
                server.drop_database(urlsplit(url).path.lstrip("/"))


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """The archive, journal and outbox tests run on both stores: `store(name)` is a location."""
    stores = Stores(request.param, tmp_path, request)
    yield stores
    stores.drop()
