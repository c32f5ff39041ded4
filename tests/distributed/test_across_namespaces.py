"""A cluster whose parts are apart: the host, each worker and a PostgreSQL server each in a network
namespace of its own (a machine of its own, as far as the network goes), each with its own data
directory, talking over addresses that exist only inside those namespaces."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from aun_runtime.testing import Namespace, PostgresServer, PrivateNetwork, postgres_bin_dir

from .processes import Process, query, start_host, start_worker, wait_until

APPS = "tests.distributed.apps"
#: A port inside the host's own namespace: nothing else can hold it there.
HOST_PORT = 50051


def _count(archive: Path, owner: str, kind: str) -> int:
    rows = query(archive, "SELECT COUNT(*) FROM archive WHERE owner = ? AND kind = ?", (owner, kind))
    return int(rows[0][0]) if rows else 0


def _texts(archive: Path, owner: str, kind: str) -> list[str]:
    rows = query(
        archive,
        "SELECT json_extract(body, '$.payload.text') FROM archive WHERE owner = ? AND kind = ? ORDER BY id",
        (owner, kind),
    )
    return [str(text) for (text,) in rows]


def test_a_host_and_two_workers_in_namespaces_of_their_own_exchange_every_message_across_a_cut(
    private_network: PrivateNetwork, procs: list[Process], tmp_path: Path
) -> None:
    machines = {label: private_network.add(label) for label in ("host", "sink", "source")}
    data = {label: tmp_path / label for label in machines}
    for directory in data.values():
        directory.mkdir()
    host, address = start_host(f"{machines['host'].address}:{HOST_PORT}", prefix=machines["host"].command([]))
    procs.append(host)
    assert address == f"{machines['host'].address}:{HOST_PORT}"
    sink_db, source_db = data["sink"] / "sink.sqlite", data["source"] / "source.sqlite"
    procs.append(start_worker(address, f"{APPS}:sink", sink_db, prefix=machines["sink"].command([])))
    count = 200
    env = {"SOURCE_COUNT": str(count), "SOURCE_BURST": "10", "SOURCE_PAUSE": "0.05"}
    procs.append(start_worker(address, f"{APPS}:source", source_db, env=env, prefix=machines["source"].command([])))

    wait_until(lambda: _count(source_db, "source.local", "received") >= 40, what="replies before the cut")
    machines["sink"].cut()
    time.sleep(3)  # the source goes on sending into the silence: its messages wait for the sink
    during = _count(sink_db, "sink.local", "received")
    time.sleep(1)
    assert _count(sink_db, "sink.local", "received") == during  # nothing reaches a cut-off sink
    assert during < count
    machines["sink"].heal()

    wait_until(lambda: _count(source_db, "source.local", "received") >= count, timeout=120, what="every reply")
    assert _texts(sink_db, "sink.local", "received") == [str(n) for n in range(count)]  # once each, in order
    assert _texts(source_db, "source.local", "received") == [f"done {n}" for n in range(count)]
    for machine in machines.values():  # each part ran inside its own namespace
        assert machine.pids(), f"nothing runs in {machine.name}"


def _psql(client: Namespace, server: Namespace, sql: str, timeout: int = 3) -> subprocess.CompletedProcess[str]:
    """``sql`` run by ``psql`` inside ``client`` against the server over TCP at ``server``'s address."""
    psql = str(postgres_bin_dir() / "psql")
    url = f"postgresql://postgres@{server.address}:5432/postgres?connect_timeout={timeout}"
    return client.run([psql, "-X", "-At", "-d", url, "-c", sql], timeout=timeout + 30)


def test_a_postgres_server_in_one_namespace_is_reached_from_another_until_it_is_cut_off(
    private_network: PrivateNetwork,
) -> None:
    database, app = private_network.add("db"), private_network.add("app")
    with PostgresServer(host=database.address, port=5432, prefix=database.command([])) as server:
        assert server.directory is not None
        answer = _psql(app, database, "SELECT inet_server_addr()")
        assert answer.returncode == 0, answer.stderr
        assert answer.stdout.strip() == database.address  # reached over the namespaces' network
        assert database.pids()  # the server runs inside its own namespace

        app.cut()
        refused = _psql(app, database, "SELECT 1", timeout=2)
        assert refused.returncode != 0 and "timeout" in refused.stderr
        app.heal()
        again = _psql(app, database, "SELECT 1", timeout=10)
        assert again.returncode == 0 and again.stdout.strip() == "1", again.stderr
